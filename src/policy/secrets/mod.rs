//! What a restricted call keeps out of the command's sight: credential paths (which read as
//! empty) and environment variables whose names look like secrets.
//!
//! Paths are hidden by name and by rule. By name: the profile's list, which configuration
//! adjusts; entries in configuration files are absolute, `~/…` (beneath every home of the
//! caller) or relative to the workspace, and the user's file may add (`hidden_paths`) and
//! show again (`unhidden_paths`, as `--unhide`), the project's may only add. By rule
//! (`rule`): files nobody listed that only their owner may read, found by a scan of the
//! homes' dot-entries (`secret_scan`) — and, as root, the files under `/etc` that others
//! may not read. A path shown again is shown with everything beneath it, whichever hid it.

pub mod rule;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::profile::{self, CacheSpec, Placeholders, ProfileSpec, SecretEnvSpec};
use super::{Mode, PolicyError};
use crate::secret_scan::{self, Scope};

/// Which environment variables are withheld from the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretEnv {
    /// Upper-case fragments; a name containing one is withheld.
    name_contains: Vec<String>,
    /// Upper-case words; a name with one between underscores is withheld.
    name_words: Vec<String>,
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
            name_words: spec
                .name_words
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
            || upper
                .split('_')
                .any(|word| self.name_words.iter().any(|w| w == word))
    }
}

/// Why a path reads as empty.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Why {
    /// An entry of the profile or a configuration file names it.
    Listed { entry: String },
    /// sandgate's own file (its logs, its configuration): never shown.
    Own,
    /// A file in a home's dot-entries that only its owner may read.
    OwnerOnly,
    /// A directory in a home's dot-entries whose files are mostly owner-only: hidden as one.
    OwnerOnlyFiles { owner_only: u32, files: u32 },
    /// A file under `/etc` that others may not read.
    NotForOthers,
    /// A directory that others may not enter: in a home's dot-entries, one of the
    /// caller's; under `/etc`, one the caller may.
    ClosedToOthers,
    /// A directory the rule's scan could not read within its bounds: hidden unread.
    Unscanned,
    /// A file in a closed directory of a home that could not be hidden whole.
    InClosedDirectory,
}

impl Why {
    /// Whether the rule found it (then the path is canonical and its kind known, as the
    /// scan saw it) rather than a name (then it is resolved again right before the sandbox
    /// starts).
    pub fn by_rule(&self) -> bool {
        !matches!(self, Why::Listed { .. } | Why::Own)
    }

    /// For a path the rule found: whether it is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(
            self,
            Why::OwnerOnlyFiles { .. } | Why::ClosedToOthers | Why::Unscanned
        )
    }
}

/// The trees the hidden-files rule scans for a call under `mode`: every home in `homes`
/// (canonical), skipping the toolchain caches (those of the `workspace-write` profile, so
/// that both restricted profiles share one scan) and the profile's `secret_rule.skip`, with
/// the XDG base directories `xdg` that lie in each (see `secret_scan::Scope::Home`); and,
/// when the caller is root, the profile's system directories. None for full access.
///
/// # Errors
/// A shipped profile that does not parse.
pub fn rule_roots(
    mode: Mode,
    homes: &[PathBuf],
    xdg: &[PathBuf],
    as_root: bool,
) -> Result<Vec<secret_scan::Root>, PolicyError> {
    let xdg: Vec<PathBuf> = xdg
        .iter()
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .collect();
    let (ProfileSpec::Restricted(spec), ProfileSpec::Restricted(ww)) = (
        profile::shipped(mode)?,
        profile::shipped(Mode::WorkspaceWrite)?,
    ) else {
        return Ok(vec![]);
    };
    let placeholders = Placeholders {
        workspace: Path::new("/"),
        ptys: vec![],
        homes,
        approval_token_file: None,
    };
    let caches = ww.caches.iter().filter_map(|c| match c {
        CacheSpec::Dir(entry) => Some(entry),
        CacheSpec::File(_) => None,
    });
    let skip: Vec<PathBuf> = caches
        .chain(&spec.secret_rule.skip)
        .flat_map(|entry| placeholders.expand(entry))
        .collect();
    let mut roots: Vec<secret_scan::Root> = homes
        .iter()
        .map(|home| secret_scan::Root {
            path: home.clone(),
            scope: Scope::Home,
            skip: skip
                .iter()
                .filter(|p| p.starts_with(home))
                .cloned()
                .collect(),
            xdg: xdg
                .iter()
                .filter(|p| p.starts_with(home))
                .cloned()
                .collect(),
        })
        .collect();
    let linked: Vec<secret_scan::Root> = homes
        .iter()
        .flat_map(|home| linked_entries(home))
        .filter(|(_, target)| !skip.iter().any(|s| target.starts_with(s)))
        .map(|(name, target)| secret_scan::Root {
            skip: skip
                .iter()
                .filter(|p| p.starts_with(&target))
                .cloned()
                .collect(),
            xdg: xdg
                .iter()
                .filter(|p| p.starts_with(&target))
                .cloned()
                .chain(xdg_stand_ins(&name, &target))
                .collect(),
            path: target,
            scope: Scope::LinkedEntry,
        })
        .collect();
    for root in linked {
        if !roots.iter().any(|r| r.path == root.path) {
            roots.push(root);
        }
    }
    if as_root {
        roots.extend(
            spec.secret_rule
                .system
                .iter()
                .filter_map(|dir| std::fs::canonicalize(dir).ok())
                .map(|path| secret_scan::Root {
                    path,
                    scope: Scope::System,
                    skip: vec![],
                    xdg: vec![],
                }),
        );
    }
    Ok(roots)
}

/// At most this many of a home's dot-entries that are links are followed.
const MAX_LINKED: usize = 16;

/// The home's dot-entries that are symbolic links to a directory of the caller's outside
/// what the home's own scan reads (a store moved to a synced folder, `~/.config` kept in a
/// dotfiles checkout), with the directory each leads to (canonical). Not one that leads
/// to the home or above it, nor into another dot-entry.
fn linked_entries(home: &Path) -> Vec<(OsString, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(home) else {
        return vec![];
    };
    let uid = nix::unistd::geteuid().as_raw();
    let mut found: Vec<(OsString, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().as_bytes().starts_with(b"."))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| Some((e.file_name(), std::fs::canonicalize(e.path()).ok()?)))
        .filter(|(_, target)| {
            std::fs::metadata(target).is_ok_and(|m| m.is_dir() && m.uid() == uid)
                && !home.starts_with(target)
                && !target
                    .strip_prefix(home)
                    .ok()
                    .and_then(|inside| inside.iter().next())
                    .is_some_and(|top| top.as_bytes().starts_with(b"."))
        })
        .collect();
    found.sort();
    found.truncate(MAX_LINKED);
    found
}

/// The directories a linked dot-entry named `name` stands in for among a home's XDG base
/// directories (`~/.config`, `~/.cache`, `~/.local` and the directories in `~/.local`),
/// whose mode says nothing of what they hold.
fn xdg_stand_ins(name: &OsStr, target: &Path) -> Vec<PathBuf> {
    match name.as_bytes() {
        b".config" | b".cache" => vec![target.to_path_buf()],
        b".local" => std::iter::once(target.to_path_buf())
            .chain(
                std::fs::read_dir(target)
                    .into_iter()
                    .flatten()
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            )
            .collect(),
        _ => vec![],
    }
}

/// One hidden path as `doctor` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Shown {
    pub path: PathBuf,
    #[serde(flatten)]
    pub why: Why,
}

/// What a call under `mode` hides outside any workspace: the rule's finds in `scans`, the
/// profile's and the user's lists, less what the user shows again.
///
/// # Errors
/// A shipped profile that does not parse.
pub fn report(
    mode: Mode,
    homes: &[PathBuf],
    scans: &[secret_scan::Snapshot],
    add: &[String],
    unhidden: &[String],
) -> Result<Vec<Shown>, PolicyError> {
    let ProfileSpec::Restricted(spec) = profile::shipped(mode)? else {
        return Ok(vec![]);
    };
    let workspace = Path::new("/");
    let placeholders = Placeholders {
        workspace,
        ptys: vec![],
        homes,
        approval_token_file: std::env::var_os("SANDGATE_APPROVAL_TOKEN_FILE").map(PathBuf::from),
    };
    let shown = shown(unhidden, &[], homes, workspace);
    let listed = listed(
        profile_entries(&spec.hidden_paths, &placeholders),
        add,
        homes,
        workspace,
    );
    let hidden = hidden(scans, &[], &[], listed, &shown.paths);
    Ok(hidden
        .into_iter()
        .map(|(path, why)| Shown { path, why })
        .collect())
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

/// The listed paths that exist, canonical, each with the entry that names it: `profile`
/// (each entry with the paths it expands to) and the configuration's `add`.
pub fn listed(
    profile: Vec<(String, Vec<PathBuf>)>,
    add: &[String],
    homes: &[PathBuf],
    workspace: &Path,
) -> BTreeMap<PathBuf, Why> {
    let configured = add
        .iter()
        .map(|e| (e.clone(), expand_entry(e, homes, workspace)));
    let mut out = BTreeMap::new();
    for (entry, paths) in profile.into_iter().chain(configured) {
        for path in canonical(paths) {
            out.entry(path).or_insert_with(|| Why::Listed {
                entry: entry.clone(),
            });
        }
    }
    out
}

/// The paths the user shows again, canonical and existing: configuration entries and
/// `--unhide` paths (absolute).
pub fn shown(
    entries: &[String],
    flags: &[PathBuf],
    homes: &[PathBuf],
    workspace: &Path,
) -> ShownAgain {
    let links: Vec<super::roots::Resolved> = entries
        .iter()
        .flat_map(|e| expand_entry(e, homes, workspace))
        .chain(flags.iter().cloned())
        .filter(|p| p.symlink_metadata().is_ok())
        .filter_map(|p| super::roots::resolve(&p).ok())
        .collect();
    let paths = links
        .iter()
        .map(|r| r.path.clone())
        .collect::<BTreeSet<_>>();
    ShownAgain {
        paths: paths.into_iter().collect(),
        links,
    }
}

/// The paths shown again, canonical, and how each was reached (the links followed).
pub struct ShownAgain {
    pub paths: Vec<PathBuf>,
    pub links: Vec<super::roots::Resolved>,
}

/// What a call hides, sandgate's own files aside: what the rule found in `scans` (no
/// directory holding one of `keep_whole` hidden whole, nothing at or beneath one of
/// `worked_in`) and the `listed` paths (a listed path keeps its entry as its reason), less
/// every path at or beneath one of `shown`.
pub fn hidden(
    scans: &[secret_scan::Snapshot],
    keep_whole: &[PathBuf],
    worked_in: &[PathBuf],
    listed: BTreeMap<PathBuf, Why>,
    shown: &[PathBuf],
) -> BTreeMap<PathBuf, Why> {
    let not_the_rules: Vec<PathBuf> = shown.iter().chain(worked_in).cloned().collect();
    let mut hidden = rule::found(scans, keep_whole, &not_the_rules);
    hidden.extend(listed);
    hidden.retain(|path, _| !shown.iter().any(|s| path.starts_with(s)));
    hidden
}

/// The profile's `hidden_paths` entries, each with the paths it expands to.
pub fn profile_entries(
    entries: &[String],
    placeholders: &Placeholders<'_>,
) -> Vec<(String, Vec<PathBuf>)> {
    entries
        .iter()
        .map(|e| (e.clone(), placeholders.expand(e)))
        .collect()
}

/// `paths` that exist, canonical.
fn canonical(paths: impl IntoIterator<Item = PathBuf>) -> BTreeSet<PathBuf> {
    paths
        .into_iter()
        // Most credential paths do not exist: one lstat says so where canonicalize would
        // read every link on the way first.
        .filter(|p| p.symlink_metadata().is_ok())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SecretEnvSpec {
        SecretEnvSpec {
            name_contains: vec!["KEY".into(), "token".into(), "AUTH".into()],
            name_words: vec!["PAT".into(), "pwd".into()],
            except: vec!["GIT_AUTHOR_NAME".into(), "PWD".into()],
        }
    }

    #[test]
    fn short_fragments_count_only_as_words() {
        let env = SecretEnv::new(&spec(), &[]);
        assert!(env.withholds(OsStr::new("GITHUB_PAT")));
        assert!(env.withholds(OsStr::new("MYSQL_PWD")));
        assert!(env.withholds(OsStr::new("pat_for_ci")));
        for passed in ["PATH", "LD_LIBRARY_PATH", "PWD", "OLDPWD", "PATTERN_DIR"] {
            assert!(!env.withholds(OsStr::new(passed)), "{passed}");
        }
    }

    #[test]
    fn the_profiles_withhold_conventional_secret_names() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            let Ok(ProfileSpec::Restricted(spec)) = profile::shipped(mode) else {
                panic!("{mode} must be restricted");
            };
            let env = SecretEnv::new(&spec.secret_env, &[]);
            for name in [
                "MYSQL_PWD",
                "BORG_PASSPHRASE",
                "CI_JOB_JWT",
                "GITHUB_PAT",
                "DB_PASS",
                "SSHPASS",
            ] {
                assert!(env.withholds(OsStr::new(name)), "{mode:?} {name}");
            }
            for name in ["PATH", "PWD", "OLDPWD", "HOME", "TERM", "LANG"] {
                assert!(!env.withholds(OsStr::new(name)), "{mode:?} {name}");
            }
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
    fn the_user_may_show_what_the_profile_hides() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let home = std::fs::canonicalize(dir.path())?;
        for d in [".ssh", ".aws", "proj/.env", ".config/app"] {
            std::fs::create_dir_all(home.join(d))?;
        }
        let homes = [home.clone()];
        let ws = home.join("proj");
        let mut listed = listed(
            vec![(
                "$HOME/.ssh".into(),
                vec![home.join(".ssh"), home.join(".absent")],
            )],
            &[".env".into(), "~/.aws".into()],
            &homes,
            &ws,
        );
        listed.insert(home.join(".config/app/token"), Why::OwnerOnly);
        let shown = shown(&["~/.aws".into()], &[home.join(".config")], &homes, &ws);
        let hidden = hidden(&[], &[], &[], listed, &shown.paths);
        assert_eq!(
            hidden,
            BTreeMap::from([
                (
                    home.join(".ssh"),
                    Why::Listed {
                        entry: "$HOME/.ssh".into()
                    }
                ),
                (
                    ws.join(".env"),
                    Why::Listed {
                        entry: ".env".into()
                    }
                ),
            ])
        );
        Ok(())
    }
}
