//! The hosts a call's sandbox may reach through sandgate's proxy. Flags, the environment,
//! the user's and the managed configuration allow; the managed and the project
//! configuration deny, and a denial always wins. A project file may not allow hosts: it
//! is written by whoever wrote the code being run.

use super::host_rules::{self as hosts, HostRules};

use super::config::{Managed, User};
use super::PolicyError;

/// Where a list of host patterns came from, for error messages and exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostsOrigin {
    /// `--allow-host` or `SANDGATE_ALLOW_HOSTS`: a usage error.
    Call,
    UserConfig,
    ManagedConfig,
    ProjectConfig,
}

impl std::fmt::Display for HostsOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostsOrigin::Call => "--allow-host",
            HostsOrigin::UserConfig => "`allowed_hosts` in the user configuration",
            HostsOrigin::ManagedConfig => "the managed configuration",
            HostsOrigin::ProjectConfig => "`denied_hosts` in the project configuration",
        })
    }
}

/// Merges the layers into one call's rules.
///
/// # Errors
/// A pattern that does not parse (`*` alone, a bad port, an unknown `@set`), naming the
/// layer it came from.
pub fn effective(
    call: &[String],
    allow_private: bool,
    user: &User,
    managed: &Managed,
    project_denied: &[String],
) -> Result<HostRules, PolicyError> {
    let parse = |entries: &[String], origin: HostsOrigin| {
        // Empty items: a trailing comma in SANDGATE_ALLOW_HOSTS names no host.
        let entries = entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty());
        hosts::parse_entries(entries).map_err(|e| PolicyError::Hosts {
            origin,
            reason: e.to_string(),
        })
    };
    let mut allowed = parse(call, HostsOrigin::Call)?;
    allowed.extend(parse(&user.allowed_hosts, HostsOrigin::UserConfig)?);
    allowed.extend(parse(&managed.allowed_hosts, HostsOrigin::ManagedConfig)?);
    let mut denied = parse(&managed.denied_hosts, HostsOrigin::ManagedConfig)?;
    denied.extend(parse(project_denied, HostsOrigin::ProjectConfig)?);
    dedup(&mut allowed);
    dedup(&mut denied);
    Ok(HostRules {
        allowed,
        denied,
        allow_private,
    })
}

/// Keeps the first of equal patterns, in order.
fn dedup<T: PartialEq>(list: &mut Vec<T>) {
    let mut kept: Vec<T> = Vec::with_capacity(list.len());
    for item in list.drain(..) {
        if !kept.contains(&item) {
            kept.push(item);
        }
    }
    *list = kept;
}

/// The hosts `SANDGATE_ALLOW_HOSTS` names, for the subcommands that report the effective
/// list without taking `--allow-host` (`presets`, `doctor`).
pub fn from_environment() -> Vec<String> {
    std::env::var("SANDGATE_ALLOW_HOSTS")
        .map(|v| v.split(',').map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn every_layer_allows_and_denials_from_managed_and_project_win() {
        let user = User {
            allowed_hosts: strings(&["example.org"]),
            ..User::default()
        };
        let managed = Managed {
            allowed_hosts: strings(&["internal.example"]),
            denied_hosts: strings(&["evil.example"]),
            ..Managed::default()
        };
        let rules = effective(
            &strings(&["evil.example", "a.test:8080", ""]),
            false,
            &user,
            &managed,
            &strings(&["a.test:8080"]),
        )
        .unwrap();
        assert_eq!(rules.allowed.len(), 4);
        assert!(matches!(
            rules.verdict("evil.example", 443),
            hosts::Verdict::Denied
        ));
        assert!(matches!(
            rules.verdict("a.test", 8080),
            hosts::Verdict::Denied
        ));
        assert!(matches!(
            rules.verdict("example.org", 443),
            hosts::Verdict::Allowed
        ));
        assert!(matches!(
            rules.verdict("other.example", 443),
            hosts::Verdict::NotListed
        ));
    }

    #[test]
    fn a_bad_pattern_names_its_layer() {
        let user = User {
            allowed_hosts: strings(&["*"]),
            ..User::default()
        };
        let err = effective(&[], false, &user, &Managed::default(), &[])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("user configuration"), "{err}");
    }
}
