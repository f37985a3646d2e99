//! Resource limits of a restricted call: a size and an inode bound on every tmpfs sandgate
//! mounts, and — where the kernel lets sandgate make a cgroup — a bound on the number of
//! the call's processes and on their memory.
//!
//! A private tmpfs is charged to nobody's quota: without a size it may take half of RAM,
//! each, and without an inode bound its empty files cost kernel memory that no size
//! counts. A call without a cgroup can fork until the machine's pid space is gone and
//! allocate until the OOM killer picks something. These bounds make "the call" a thing the
//! kernel can count.
//!
//! Where a value comes from, highest trust first: the managed configuration (`tmpfs_size`,
//! `limit_pids`, `limit_memory`: a cap, and the value when nothing lower is asked), flags
//! and their `SANDGATE_*` variables, the user configuration, the standing preset's
//! defaults (`profiles/presets.json`), and the project configuration, which may only lower
//! a value. A limit somebody asked for (flag, variable, user or managed configuration) is
//! *explicit*: when it cannot hold here the call is refused (78) unless
//! `--allow-degraded`. A preset's or a project's default that cannot hold is said in one
//! note and the call runs.
//!
//! `cgroup` finds, makes, joins and removes the call's cgroups.

pub mod cgroup;
mod size;

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

pub use size::{human, Size, SizeError};

/// The largest tmpfs sandgate makes by default, whatever the RAM: builds rarely need more
/// than a gigabyte of temporary files, and a machine rarely has it to spare twice over
/// (a call has two: `/tmp` and `/dev/shm`).
const DEFAULT_TMPFS_MAX: u64 = 1 << 30;

/// One inode per page of a tmpfs's size: the ratio of the kernel's own default (half of
/// RAM in pages for the size, as many inodes), so a bounded tmpfs holds as many small
/// files, relative to its size, as an unbounded one would. An inode and its dentry cost
/// about 1 KiB of unaccounted kernel memory, so the worst case stays within a quarter of
/// the size on top of it.
const BYTES_PER_INODE: u64 = 4096;

/// The fewest inodes a bounded tmpfs gets: its root, and the mount points of what stays
/// visible beneath it.
const MIN_INODES: u64 = 64;

/// The bound of one tmpfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TmpfsBound {
    pub bytes: u64,
    pub inodes: u64,
}

impl TmpfsBound {
    /// A bound of `bytes`, with the inodes that go with it.
    pub fn of(bytes: u64) -> TmpfsBound {
        TmpfsBound {
            bytes,
            inodes: (bytes / BYTES_PER_INODE).max(MIN_INODES),
        }
    }

    /// The default on a machine with `ram` bytes of RAM: the smaller of 1 GiB and a quarter
    /// of it.
    pub fn default_for(ram: u64) -> TmpfsBound {
        TmpfsBound::of(DEFAULT_TMPFS_MAX.min(ram / 4).max(BYTES_PER_INODE))
    }

    /// The mount options of a tmpfs with this bound and the given `mode`.
    pub fn options(&self, mode: &str) -> String {
        format!("mode={mode},size={},nr_inodes={}", self.bytes, self.inodes)
    }
}

impl Default for TmpfsBound {
    fn default() -> TmpfsBound {
        TmpfsBound::default_for(ram())
    }
}

/// `MemTotal`, in bytes (0 when the kernel cannot say: every share of it is then the
/// smallest bound).
pub fn ram() -> u64 {
    nix::sys::sysinfo::sysinfo().map_or(0, |i| i.ram_total())
}

/// What one layer asks for. Each configuration file has these three keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    pub tmpfs_size: Option<Size>,
    pub pids: Option<NonZeroU64>,
    pub memory: Option<Size>,
}

/// A preset's defaults (`limits` in `profiles/presets.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<NonZeroU64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Size>,
}

impl PresetLimits {
    /// Whether the preset sets no limit.
    pub fn is_empty(&self) -> bool {
        self.pids.is_none() && self.memory.is_none()
    }
}

/// Where a limit's value came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "source", content = "preset")]
pub enum Origin {
    /// The flag or its `SANDGATE_*` variable.
    Flag,
    UserConfig,
    ManagedConfig,
    /// The project configuration lowered it.
    ProjectConfig,
    /// The standing preset's default.
    Preset(String),
    /// sandgate's own default (tmpfs only).
    #[default]
    Default,
}

/// One cgroup limit of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Limit {
    /// Processes (tasks, threads included), or bytes.
    pub value: u64,
    pub origin: Origin,
    /// Asked for by a flag, a variable, the user or the managed configuration: when it
    /// cannot hold, the call is refused unless degraded runs are allowed.
    pub explicit: bool,
}

/// Which cgroup limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    LimitPids,
    LimitMemory,
}

impl Kind {
    /// Its name, as `--allow-degraded` takes it and markers list it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::LimitPids => "limit-pids",
            Kind::LimitMemory => "limit-memory",
        }
    }

    /// The flag that asks for it.
    pub fn flag(self) -> &'static str {
        match self {
            Kind::LimitPids => "--limit-pids",
            Kind::LimitMemory => "--limit-memory",
        }
    }

    /// The cgroup controller that enforces it.
    pub fn controller(self) -> &'static str {
        match self {
            Kind::LimitPids => "pids",
            Kind::LimitMemory => "memory",
        }
    }

    /// The configuration key that asks for it.
    pub fn key(self) -> &'static str {
        match self {
            Kind::LimitPids => "limit_pids",
            Kind::LimitMemory => "limit_memory",
        }
    }

    /// What a message calls it.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::LimitPids => "pid limit",
            Kind::LimitMemory => "memory limit",
        }
    }

    /// Its value as people read it.
    pub fn show(self, value: u64) -> String {
        match self {
            Kind::LimitPids => value.to_string(),
            Kind::LimitMemory => human(value),
        }
    }

    /// `the pid limit (--limit-pids 50)`: the limit and who asked for it.
    pub fn describe(self, limit: &Limit) -> String {
        let value = self.show(limit.value);
        let key = self.key();
        match &limit.origin {
            Origin::Flag => format!(
                "the {} ({} {value}, or SANDGATE_{})",
                self.noun(),
                self.flag(),
                key.to_ascii_uppercase()
            ),
            Origin::UserConfig => format!(
                "the {} ({key} {value} in the user configuration)",
                self.noun()
            ),
            Origin::ManagedConfig => format!(
                "the {} ({key} {value} in the managed configuration)",
                self.noun()
            ),
            Origin::ProjectConfig => format!(
                "the {} ({key} {value} in the project configuration)",
                self.noun()
            ),
            Origin::Preset(preset) => format!("the {} preset's {} ({value})", preset, self.noun()),
            Origin::Default => format!("the {} ({value})", self.noun()),
        }
    }
}

/// A cgroup limit of the call that cannot hold here, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unenforced {
    pub kind: Kind,
    pub limit: Limit,
    pub why: String,
}

impl std::fmt::Display for Unenforced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cannot hold here: {}",
            self.kind.describe(&self.limit),
            self.why
        )
    }
}

/// The limits of one call, resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Every private tmpfs of the call, each.
    pub tmpfs: TmpfsBound,
    pub tmpfs_origin: Origin,
    pub pids: Option<Limit>,
    pub memory: Option<Limit>,
}

impl Limits {
    /// The cgroup limits, with their kinds.
    pub fn cgroup(&self) -> impl Iterator<Item = (Kind, &Limit)> {
        [
            (Kind::LimitPids, &self.pids),
            (Kind::LimitMemory, &self.memory),
        ]
        .into_iter()
        .filter_map(|(k, l)| Some((k, l.as_ref()?)))
    }
}

/// The layers a call's limits are resolved from.
#[derive(Clone, Debug, Default)]
pub struct Layers<'a> {
    pub flags: Asked,
    pub user: Asked,
    pub managed: Asked,
    pub project: Asked,
    /// The standing preset's key and defaults.
    pub preset: Option<(&'a str, PresetLimits)>,
}

/// Resolved limits, and what a person should hear about how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub limits: Limits,
    /// Ignored project keys (a project may only lower a limit).
    pub warnings: Vec<String>,
    /// Values the managed configuration lowered.
    pub notes: Vec<String>,
}

/// Resolves the limits of a call on a machine with `ram` bytes of RAM; see the module
/// docs for the order.
pub fn resolve(layers: &Layers<'_>, ram: u64) -> Resolved {
    let mut out = Resolved::default();
    let bytes = |s: Size| s.bytes(ram);
    let preset = layers
        .preset
        .map(|(key, l)| (Origin::Preset(key.to_owned()), l));
    let tmpfs = one(
        "tmpfs_size",
        "--tmpfs-size",
        [
            (Origin::Flag, layers.flags.tmpfs_size.map(bytes)),
            (Origin::UserConfig, layers.user.tmpfs_size.map(bytes)),
            (Origin::Default, Some(TmpfsBound::default_for(ram).bytes)),
        ],
        layers.project.tmpfs_size.map(bytes),
        layers.managed.tmpfs_size.map(bytes),
        &mut out,
        human,
    );
    out.limits.tmpfs = tmpfs
        .as_ref()
        .map_or_else(|| TmpfsBound::default_for(ram), |l| TmpfsBound::of(l.value));
    out.limits.tmpfs_origin = tmpfs.map_or(Origin::Default, |l| l.origin);
    let preset_pids = preset
        .clone()
        .map(|(o, l)| (o, l.pids.map(NonZeroU64::get)));
    let mut pids_layers = vec![
        (Origin::Flag, layers.flags.pids.map(NonZeroU64::get)),
        (Origin::UserConfig, layers.user.pids.map(NonZeroU64::get)),
    ];
    pids_layers.extend(preset_pids);
    out.limits.pids = one(
        "limit_pids",
        "--limit-pids",
        pids_layers,
        layers.project.pids.map(NonZeroU64::get),
        layers.managed.pids.map(NonZeroU64::get),
        &mut out,
        |n| n.to_string(),
    );
    let preset_memory = preset.map(|(o, l)| (o, l.memory.map(bytes)));
    let mut memory_layers = vec![
        (Origin::Flag, layers.flags.memory.map(bytes)),
        (Origin::UserConfig, layers.user.memory.map(bytes)),
    ];
    memory_layers.extend(preset_memory);
    out.limits.memory = one(
        "limit_memory",
        "--limit-memory",
        memory_layers,
        layers.project.memory.map(bytes),
        layers.managed.memory.map(bytes),
        &mut out,
        human,
    );
    out
}

/// Resolves one limit: the first layer that sets it, capped by the managed configuration,
/// then lowered by the project (which is compared with everything else in force).
fn one(
    key: &str,
    flag: &str,
    layers: impl IntoIterator<Item = (Origin, Option<u64>)>,
    project: Option<u64>,
    managed: Option<u64>,
    out: &mut Resolved,
    show: fn(u64) -> String,
) -> Option<Limit> {
    let mut limit = layers
        .into_iter()
        .find_map(|(origin, value)| Some((origin, value?)))
        .map(|(origin, value)| Limit {
            explicit: matches!(origin, Origin::Flag | Origin::UserConfig),
            value,
            origin,
        });
    if let Some(cap) = managed {
        match &mut limit {
            Some(limit) if limit.value > cap => {
                if limit.origin == Origin::Flag {
                    out.notes.push(format!(
                        "{flag} {} lowered to {}: the managed configuration caps it",
                        show(limit.value),
                        show(cap)
                    ));
                }
                limit.value = cap;
                limit.origin = Origin::ManagedConfig;
                limit.explicit = true;
            }
            // The managed value holds whatever else asks: the call needs it to hold.
            Some(limit) => limit.explicit = true,
            None => {
                limit = Some(Limit {
                    value: cap,
                    origin: Origin::ManagedConfig,
                    explicit: true,
                })
            }
        }
    }
    match (project, &mut limit) {
        (Some(p), Some(limit)) if p >= limit.value => out.warnings.push(format!(
            "project config: ignoring `{key}`: {} is not below the {} in force (a project file may only narrow)",
            show(p),
            show(limit.value)
        )),
        (Some(p), Some(limit)) => {
            limit.value = p;
            limit.origin = Origin::ProjectConfig;
        }
        (Some(p), None) => {
            limit = Some(Limit {
                value: p,
                origin: Origin::ProjectConfig,
                explicit: false,
            })
        }
        (None, _) => {}
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn pids(n: u64) -> Option<NonZeroU64> {
        NonZeroU64::new(n)
    }

    #[test]
    fn the_tmpfs_default_is_the_smaller_of_a_gibibyte_and_a_quarter_of_ram() {
        assert_eq!(TmpfsBound::default_for(24 * GIB).bytes, GIB);
        assert_eq!(TmpfsBound::default_for(2 * GIB).bytes, GIB / 2);
        assert_eq!(TmpfsBound::default_for(GIB).inodes, GIB / 4 / 4096);
        assert_eq!(TmpfsBound::of(1 << 20).inodes, 256);
        assert_eq!(TmpfsBound::of(4096).inodes, MIN_INODES);
        assert_eq!(
            TmpfsBound::of(1 << 20).options("1777"),
            "mode=1777,size=1048576,nr_inodes=256"
        );
        let r = resolve(&Layers::default(), 24 * GIB);
        assert_eq!(r.limits.tmpfs, TmpfsBound::of(GIB));
        assert_eq!(r.limits.tmpfs_origin, Origin::Default);
        assert_eq!((r.limits.pids, r.limits.memory), (None, None));
    }

    #[test]
    fn flags_beat_the_user_file_which_beats_the_preset() {
        let layers = Layers {
            flags: Asked {
                pids: pids(50),
                ..Asked::default()
            },
            user: Asked {
                pids: pids(70),
                memory: Some(Size::Bytes(GIB)),
                tmpfs_size: Some(Size::PercentOfRam(50)),
            },
            preset: Some((
                "ci",
                PresetLimits {
                    pids: pids(4096),
                    memory: Some(Size::PercentOfRam(75)),
                },
            )),
            ..Layers::default()
        };
        let r = resolve(&layers, 8 * GIB);
        let pids = r.limits.pids.clone();
        assert_eq!(
            pids.map(|l| (l.value, l.origin, l.explicit)),
            Some((50, Origin::Flag, true))
        );
        let memory = r.limits.memory.clone();
        assert_eq!(
            memory.map(|l| (l.value, l.origin, l.explicit)),
            Some((GIB, Origin::UserConfig, true))
        );
        assert_eq!(r.limits.tmpfs.bytes, 4 * GIB);
        let only_preset = Layers {
            preset: layers.preset,
            ..Layers::default()
        };
        let r = resolve(&only_preset, 8 * GIB);
        let memory = r.limits.memory.clone();
        assert_eq!(
            memory.map(|l| (l.value, l.origin, l.explicit)),
            Some((6 * GIB, Origin::Preset("ci".into()), false))
        );
    }

    #[test]
    fn a_project_may_only_lower_a_limit() {
        let layers = Layers {
            flags: Asked {
                memory: Some(Size::Bytes(GIB)),
                tmpfs_size: Some(Size::Bytes(GIB)),
                ..Asked::default()
            },
            project: Asked {
                memory: Some(Size::Bytes(2 * GIB)),
                tmpfs_size: Some(Size::Bytes(GIB / 2)),
                pids: pids(100),
            },
            ..Layers::default()
        };
        let r = resolve(&layers, 8 * GIB);
        assert_eq!(r.limits.memory.as_ref().map(|l| l.value), Some(GIB));
        assert_eq!(r.limits.tmpfs.bytes, GIB / 2);
        let pids = r.limits.pids.clone();
        assert_eq!(
            pids.map(|l| (l.value, l.origin, l.explicit)),
            Some((100, Origin::ProjectConfig, false))
        );
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(r.warnings[0].contains("`limit_memory`: 2G is not below the 1G"));
        // Nor may it raise sandgate's own tmpfs default.
        let raise = Layers {
            project: Asked {
                tmpfs_size: Some(Size::Bytes(64 * GIB)),
                ..Asked::default()
            },
            ..Layers::default()
        };
        let r = resolve(&raise, 8 * GIB);
        assert_eq!(r.limits.tmpfs.bytes, GIB);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    }

    #[test]
    fn the_managed_file_caps_every_layer_and_its_value_is_explicit() {
        let layers = Layers {
            flags: Asked {
                pids: pids(10_000),
                ..Asked::default()
            },
            managed: Asked {
                pids: pids(500),
                memory: Some(Size::Bytes(GIB)),
                tmpfs_size: Some(Size::Bytes(GIB / 4)),
            },
            preset: Some((
                "ci",
                PresetLimits {
                    memory: Some(Size::Bytes(GIB / 2)),
                    ..PresetLimits::default()
                },
            )),
            ..Layers::default()
        };
        let r = resolve(&layers, 8 * GIB);
        let pids = r.limits.pids.clone();
        assert_eq!(
            pids.map(|l| (l.value, l.origin, l.explicit)),
            Some((500, Origin::ManagedConfig, true))
        );
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].starts_with("--limit-pids 10000 lowered to 500"));
        // A lower preset value stands, but must now hold: the managed file asks for a bound.
        let memory = r.limits.memory.clone();
        assert_eq!(memory.map(|l| (l.value, l.explicit)), Some((GIB / 2, true)));
        assert_eq!(r.limits.tmpfs.bytes, GIB / 4);
    }

    #[test]
    fn preset_limits_are_data() -> Result<(), serde_json::Error> {
        let l: PresetLimits = serde_json::from_str(r#"{"pids": 4096, "memory": "75%"}"#)?;
        assert_eq!(l.pids, pids(4096));
        assert_eq!(l.memory, Some(Size::PercentOfRam(75)));
        assert!(serde_json::from_str::<PresetLimits>(r#"{"pids": 0}"#).is_err());
        assert!(serde_json::from_str::<PresetLimits>(r#"{"cpu": 1}"#).is_err());
        Ok(())
    }
}
