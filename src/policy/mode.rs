//! The closed, totally ordered set of sandbox modes.
//!
//! `Mode` derives `Ord` from its declaration order, least permissive first, so "is this
//! wider?" is a plain comparison everywhere else in the crate.

use std::fmt;
use std::str::FromStr;

/// One of the three sandbox profiles, ordered from least to most permissive.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    ReadOnly,
    WorkspaceWrite,
    #[serde(alias = "danger-full-access")]
    FullAccess,
}

impl Mode {
    /// Every mode, narrowest first.
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::FullAccess];

    /// Returns the canonical spelling used on the command line, in JSON and in markers.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The error for a mode name outside the closed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode {0:?}: expected read-only, workspace-write or full-access")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read-only" => Ok(Mode::ReadOnly),
            "workspace-write" => Ok(Mode::WorkspaceWrite),
            // `danger-full-access` is the spelling other agents use; accepted as an alias.
            "full-access" | "danger-full-access" => Ok(Mode::FullAccess),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_ordered_narrowest_first() {
        assert!(Mode::ReadOnly < Mode::WorkspaceWrite);
        assert!(Mode::WorkspaceWrite < Mode::FullAccess);
    }

    #[test]
    fn names_round_trip_and_alias_parses() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
        }
        assert_eq!("danger-full-access".parse::<Mode>(), Ok(Mode::FullAccess));
        assert_eq!("auto".parse::<Mode>(), Err(UnknownMode("auto".into())));
    }
}
