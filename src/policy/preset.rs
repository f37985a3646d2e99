//! Presets: named (mode, approval) pairs, shipped as data in
//! `profiles/presets.json`. The *current* preset is derived from the effective pair, never
//! stored: an explicitly chosen key that still matches wins, else the first matching row,
//! else `custom` — which names a combination and cannot be selected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::mode::Mode;
use crate::limits::PresetLimits;

const PRESETS: &str = include_str!("../../profiles/presets.json");

/// When an escalation request is put to an answerer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approval {
    /// Ask the configured answerer when a call requests a wider mode.
    OnRequest,
    /// Reject every escalation request without asking anyone. Not a grant.
    Never,
}

impl Approval {
    /// Returns the canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::OnRequest => "on-request",
            Approval::Never => "never",
        }
    }
}

impl fmt::Display for Approval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Approval {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on-request" => Ok(Approval::OnRequest),
            "never" => Ok(Approval::Never),
            other => Err(format!(
                "unknown approval policy {other:?}: expected on-request or never"
            )),
        }
    }
}

/// One row of the preset table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    pub key: String,
    pub aliases: Vec<String>,
    pub mode: Mode,
    pub approval: Approval,
    pub description: String,
    /// Default limits of a call under this preset (a flag or configuration overrides them).
    #[serde(default, skip_serializing_if = "PresetLimits::is_empty")]
    pub limits: PresetLimits,
}

/// The name `custom`: what a combination matching no row is called.
pub const CUSTOM: &str = "custom";

/// Returns the shipped preset table.
pub fn table() -> Vec<Preset> {
    // The table is embedded at build time and covered by a unit test; a parse failure is
    // a build defect, and an empty table then makes every selection an error.
    serde_json::from_str(PRESETS).unwrap_or_default()
}

/// Finds the row for `key` or one of its aliases.
///
/// # Errors
/// An unknown key (or `custom`): the message lists every valid key.
pub fn find(key: &str) -> Result<Preset, String> {
    let rows = table();
    if let Some(row) = rows
        .iter()
        .find(|p| p.key == key || p.aliases.iter().any(|a| a == key))
    {
        return Ok(row.clone());
    }
    let valid: Vec<&str> = rows.iter().map(|p| p.key.as_str()).collect();
    let why = if key == CUSTOM {
        "`custom` names a combination and cannot be selected"
    } else {
        "unknown preset"
    };
    Err(format!(
        "{why}: {key:?}; valid presets: {}",
        valid.join(", ")
    ))
}

/// Returns the key of the current preset for the effective pair.
pub fn derive(mode: Mode, approval: Approval, chosen: Option<&str>) -> String {
    let rows = table();
    let matches = |p: &&Preset| p.mode == mode && p.approval == approval;
    if let Some(row) = chosen.and_then(|k| rows.iter().filter(matches).find(|p| p.key == k)) {
        return row.key.clone();
    }
    rows.iter()
        .find(matches)
        .map_or_else(|| CUSTOM.to_owned(), |p| p.key.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_rows_map_to_their_pairs() {
        let pairs: Vec<(String, Mode, Approval)> = table()
            .into_iter()
            .map(|p| (p.key, p.mode, p.approval))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("read-only".into(), Mode::ReadOnly, Approval::OnRequest),
                (
                    "workspace-write".into(),
                    Mode::WorkspaceWrite,
                    Approval::OnRequest
                ),
                ("full-access".into(), Mode::FullAccess, Approval::Never),
                ("ci".into(), Mode::WorkspaceWrite, Approval::Never),
                ("locked".into(), Mode::ReadOnly, Approval::Never),
            ]
        );
        assert_eq!(find("auto").map(|p| p.key), Ok("workspace-write".into()));
    }

    #[test]
    fn derivation_prefers_a_still_matching_choice_then_the_first_row_then_custom() {
        assert_eq!(derive(Mode::WorkspaceWrite, Approval::Never, None), "ci");
        assert_eq!(
            derive(Mode::ReadOnly, Approval::OnRequest, None),
            "read-only"
        );
        assert_eq!(derive(Mode::FullAccess, Approval::OnRequest, None), CUSTOM);
        assert_eq!(
            derive(Mode::ReadOnly, Approval::Never, Some("locked")),
            "locked"
        );
        assert_eq!(
            derive(Mode::ReadOnly, Approval::Never, Some("ci")),
            "locked"
        );
    }

    #[test]
    fn custom_and_unknown_keys_are_refused_with_the_valid_list() {
        for key in [CUSTOM, "nope"] {
            let err = find(key).err().unwrap_or_default();
            assert!(
                err.contains("read-only, workspace-write, full-access, ci, locked"),
                "{err}"
            );
        }
    }
}
