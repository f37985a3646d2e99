//! How long a restricted call's processes live: its time limit, and whether what the
//! command leaves running outlives the call (`--keep-background`).
//!
//! A time limit comes from `--timeout`, else `SANDGATE_TIMEOUT`, else the user file; the
//! managed file's and the project file's can only shorten it (the shortest wins), since the
//! managed file is a ceiling and a project may only narrow. Keeping the background is the
//! caller's choice alone — flag, variable or user file: a project file may not ask for it
//! (see `config::narrowing`).

use std::time::Duration;

use super::config::{Managed, User};

/// The lifetime of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lifetime {
    /// When it passes, the command and everything it started end.
    pub timeout: Option<Duration>,
    /// What the command leaves running stays (in its PID namespace) after it ends.
    pub keep_background: bool,
}

/// Merges the layers: `asked` is the flag's (or its variable's) limit, `keep` the flag.
pub fn resolve(
    asked: Option<Duration>,
    keep: bool,
    user: &User,
    managed: &Managed,
    project: Option<Duration>,
) -> Lifetime {
    Lifetime {
        timeout: [asked.or(user.timeout), managed.timeout, project]
            .into_iter()
            .flatten()
            .min(),
        keep_background: keep || user.keep_background,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_limit_wins_and_the_flag_replaces_the_users_default() {
        let secs = Duration::from_secs;
        let user = User {
            timeout: Some(secs(600)),
            ..User::default()
        };
        let none = Managed::default();
        assert_eq!(
            resolve(None, false, &user, &none, None).timeout,
            Some(secs(600))
        );
        // The flag replaces the user's default, longer or shorter...
        assert_eq!(
            resolve(Some(secs(900)), false, &user, &none, None).timeout,
            Some(secs(900))
        );
        // ...but neither the managed ceiling nor the project's limit can be passed.
        let managed = Managed {
            timeout: Some(secs(300)),
            ..Managed::default()
        };
        assert_eq!(
            resolve(Some(secs(900)), false, &user, &managed, None).timeout,
            Some(secs(300))
        );
        assert_eq!(
            resolve(Some(secs(900)), false, &user, &none, Some(secs(60))).timeout,
            Some(secs(60))
        );
        assert_eq!(
            resolve(None, false, &User::default(), &none, None),
            Lifetime::default()
        );
    }

    #[test]
    fn keeping_the_background_is_the_flags_or_the_users() {
        let none = Managed::default();
        assert!(resolve(None, true, &User::default(), &none, None).keep_background);
        let user = User {
            keep_background: true,
            ..User::default()
        };
        assert!(resolve(None, false, &user, &none, None).keep_background);
        assert!(!resolve(None, false, &User::default(), &none, None).keep_background);
    }
}
