//! What a restricted call keeps out of the command's sight: credential paths (which read as
//! empty) and environment variables whose names look like secrets.
//!
//! Both come from the profile; configuration adjusts the paths. Entries in configuration
//! files are absolute, `~/…` (beneath every home of the caller) or relative to the
//! workspace. The user's file may add (`hidden_paths`) and remove (`unhidden_paths`); the
//! project's may only add.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::profile::SecretEnvSpec;

/// Which environment variables are withheld from the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretEnv {
    /// Upper-case fragments; a name containing one is withheld.
    name_contains: Vec<String>,
    /// Names passed even though they contain a fragment.
    passed: BTreeSet<String>,
}

impl SecretEnv {
    /// The profile's rule, with `keep` (from `--keep-env` and configuration) passed too.
    pub fn new(spec: &SecretEnvSpec, keep: &[String]) -> SecretEnv {
        SecretEnv {
            name_contains: spec
                .name_contains
                .iter()
                .map(|p| p.to_ascii_uppercase())
                .collect(),
            passed: spec.except.iter().chain(keep).cloned().collect(),
        }
    }

    /// Returns true when the variable `name` is not passed to the command.
    pub fn withholds(&self, name: &OsStr) -> bool {
        let name = name.to_string_lossy();
        if self.passed.contains(name.as_ref()) {
            return false;
        }
        let upper = name.to_ascii_uppercase();
        self.name_contains
            .iter()
            .any(|p| upper.contains(p.as_str()))
    }
}

/// Expands one configuration entry into the paths it names.
pub fn expand_entry(entry: &str, homes: &[PathBuf], workspace: &Path) -> Vec<PathBuf> {
    if entry == "~" {
        return homes.to_vec();
    }
    if let Some(rest) = entry.strip_prefix("~/") {
        return homes.iter().map(|h| h.join(rest)).collect();
    }
    vec![workspace.join(entry)]
}

/// The hidden paths of a call: `profile` (already expanded) plus `add`, minus `remove`,
/// canonical and existing. Entries are compared after canonicalisation, so a removal names
/// a path however it is spelt.
pub fn hidden(
    profile: Vec<PathBuf>,
    add: &[String],
    remove: &[String],
    homes: &[PathBuf],
    workspace: &Path,
) -> BTreeSet<PathBuf> {
    let canonical = |paths: Vec<PathBuf>| -> BTreeSet<PathBuf> {
        paths
            .into_iter()
            // Most credential paths do not exist: one lstat says so where canonicalize
            // would read every link on the way first.
            .filter(|p| p.symlink_metadata().is_ok())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect()
    };
    let expand = |entries: &[String]| -> Vec<PathBuf> {
        entries
            .iter()
            .flat_map(|e| expand_entry(e, homes, workspace))
            .collect()
    };
    let mut out = canonical(profile);
    out.extend(canonical(expand(add)));
    for gone in canonical(expand(remove)) {
        out.remove(&gone);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SecretEnvSpec {
        SecretEnvSpec {
            name_contains: vec!["KEY".into(), "token".into(), "AUTH".into()],
            except: vec!["GIT_AUTHOR_NAME".into()],
        }
    }

    #[test]
    fn secret_looking_names_are_withheld_case_insensitively() {
        let env = SecretEnv::new(&spec(), &["OPENAI_API_KEY".into()]);
        assert!(env.withholds(OsStr::new("ANTHROPIC_API_KEY")));
        assert!(env.withholds(OsStr::new("github_token")));
        assert!(env.withholds(OsStr::new("SSH_AUTH_SOCK")));
        assert!(!env.withholds(OsStr::new("OPENAI_API_KEY")));
        assert!(!env.withholds(OsStr::new("GIT_AUTHOR_NAME")));
        assert!(!env.withholds(OsStr::new("PATH")));
        assert!(!env.withholds(OsStr::new("SANDGATE_PARENT_MODE")));
    }

    #[test]
    fn the_user_may_remove_what_the_profile_hides() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let home = std::fs::canonicalize(dir.path())?;
        for d in [".ssh", ".aws", "proj/.env"] {
            std::fs::create_dir_all(home.join(d))?;
        }
        let out = hidden(
            vec![home.join(".ssh"), home.join(".aws"), home.join(".absent")],
            &[".env".into()],
            &["~/.aws".into()],
            std::slice::from_ref(&home),
            &home.join("proj"),
        );
        assert_eq!(
            out,
            BTreeSet::from([home.join(".ssh"), home.join("proj/.env")])
        );
        Ok(())
    }
}
