//! The standing policy of a call — its mode, approval policy and derived preset — merged
//! from the configuration layers, before any escalation request is considered.
//!
//! Order of application, lowest trust first, each overriding the last: the default
//! (`workspace-write`, `on-request`), the user file, flags and environment (clap has
//! already let a flag beat its variable). Within a layer a preset sets both knobs and an
//! explicit `sandbox`/`approval` overrides it. Then the project file may only narrow, the
//! managed file's `allowed_presets` and `max_mode` are checked, and inside an enclosing
//! sandgate the mode cannot exceed the parent's and approval is pinned to `never`.

use super::config::{self, Managed, Project, User};
use super::mode::Mode;
use super::preset::{self, Approval};
use super::{Parent, PolicyError};

/// The knobs one layer sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knobs {
    pub preset: Option<String>,
    pub mode: Option<Mode>,
    pub approval: Option<Approval>,
}

/// The effective standing policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    pub mode: Mode,
    pub approval: Approval,
    /// The derived current preset (`custom` when no row matches).
    pub preset: String,
    /// The managed ceiling, which no escalation may exceed.
    pub max_mode: Option<Mode>,
    /// Extra protected subpaths from the project file.
    pub protected_subpaths: Vec<String>,
    /// Extra hidden paths from the project file.
    pub hidden_paths: Vec<String>,
    /// Hosts the project file denies.
    pub denied_hosts: Vec<String>,
    /// The limits the project file asks for (it may only lower them: `limits::resolve`).
    pub project_limits: crate::limits::Asked,
    /// The project file's time limit, which may only shorten the call's.
    pub project_timeout: Option<std::time::Duration>,
    /// Set when an enclosing sandgate narrowed the mode: the mode asked for.
    pub narrowed_from: Option<Mode>,
    /// Things a person should know (ignored project keys).
    pub warnings: Vec<String>,
}

/// Which layer a value came from, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flags,
    UserConfig,
}

fn apply(
    layer: &Knobs,
    origin: Origin,
    mode: &mut Mode,
    approval: &mut Approval,
) -> Result<(), PolicyError> {
    if let Some(key) = &layer.preset {
        let row = preset::find(key).map_err(|message| PolicyError::Preset { origin, message })?;
        *mode = row.mode;
        *approval = row.approval;
    }
    if let Some(m) = layer.mode {
        *mode = m;
    }
    if let Some(a) = layer.approval {
        *approval = a;
    }
    Ok(())
}

/// Merges the layers into the standing policy.
///
/// # Errors
/// An unknown preset, a preset the managed file does not allow, or a standing mode above
/// the managed ceiling.
pub fn resolve(
    flags: &Knobs,
    user: &User,
    managed: &Managed,
    project: &Project,
    parent: Option<&Parent>,
) -> Result<Standing, PolicyError> {
    let mut mode = Mode::WorkspaceWrite;
    let mut approval = Approval::OnRequest;
    let user_knobs = Knobs {
        preset: user.preset.clone(),
        mode: user.sandbox,
        approval: user.approval,
    };
    apply(&user_knobs, Origin::UserConfig, &mut mode, &mut approval)?;
    apply(flags, Origin::Flags, &mut mode, &mut approval)?;
    let chosen = flags.preset.clone().or_else(|| user.preset.clone());

    let narrowing = config::narrowing(project, mode, approval);
    if let Some(m) = narrowing.mode {
        mode = mode.min(m);
    }
    if narrowing.never {
        approval = Approval::Never;
    }

    if let Some(max) = managed.max_mode {
        if mode > max {
            return Err(PolicyError::AboveCeiling { mode, max });
        }
    }
    let mut narrowed_from = None;
    if let Some(parent) = parent {
        if mode > parent.mode {
            narrowed_from = Some(mode);
            mode = parent.mode;
        }
        approval = Approval::Never;
    }
    let preset = preset::derive(mode, approval, chosen.as_deref());
    if let Some(allowed) = &managed.allowed_presets {
        let named = chosen.iter().chain(std::iter::once(&preset));
        if let Some(bad) = named.clone().find(|k| !allowed.iter().any(|a| a == *k)) {
            return Err(PolicyError::PresetNotAllowed {
                key: bad.clone(),
                allowed: allowed.clone(),
            });
        }
    }
    Ok(Standing {
        mode,
        approval,
        preset,
        max_mode: managed.max_mode,
        protected_subpaths: narrowing.protected_paths,
        hidden_paths: narrowing.hidden_paths,
        denied_hosts: narrowing.denied_hosts,
        project_limits: project.limits(),
        project_timeout: narrowing.timeout,
        narrowed_from,
        warnings: narrowing.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(preset: Option<&str>, mode: Option<Mode>, approval: Option<Approval>) -> Knobs {
        Knobs {
            preset: preset.map(str::to_owned),
            mode,
            approval,
        }
    }

    fn standing(f: Knobs) -> Result<Standing, PolicyError> {
        resolve(
            &f,
            &User::default(),
            &Managed::default(),
            &Project::default(),
            None,
        )
    }

    #[test]
    fn knobs_derive_presets() -> Result<(), PolicyError> {
        let s = standing(flags(
            None,
            Some(Mode::WorkspaceWrite),
            Some(Approval::Never),
        ))?;
        assert_eq!(s.preset, "ci");
        let s = standing(flags(None, Some(Mode::ReadOnly), Some(Approval::OnRequest)))?;
        assert_eq!(s.preset, "read-only");
        let s = standing(flags(
            None,
            Some(Mode::FullAccess),
            Some(Approval::OnRequest),
        ))?;
        assert_eq!(s.preset, "custom");
        let s = standing(flags(Some("auto"), None, None))?;
        assert_eq!(
            (s.mode, s.approval, s.preset.as_str()),
            (Mode::WorkspaceWrite, Approval::OnRequest, "workspace-write")
        );
        Ok(())
    }

    #[test]
    fn custom_and_unknown_presets_are_refused() {
        assert!(matches!(
            standing(flags(Some("custom"), None, None)),
            Err(PolicyError::Preset { .. })
        ));
        assert!(matches!(
            standing(flags(Some("yolo"), None, None)),
            Err(PolicyError::Preset { .. })
        ));
    }

    #[test]
    fn flags_beat_the_user_file_and_the_project_only_narrows() -> Result<(), PolicyError> {
        let user = User {
            sandbox: Some(Mode::FullAccess),
            ..User::default()
        };
        let project = Project {
            sandbox: Some(Mode::FullAccess),
            approval: Some(Approval::Never),
            ..Project::default()
        };
        let s = resolve(
            &flags(Some("read-only"), None, None),
            &user,
            &Managed::default(),
            &project,
            None,
        )?;
        assert_eq!((s.mode, s.approval), (Mode::ReadOnly, Approval::Never));
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        Ok(())
    }

    #[test]
    fn the_managed_file_caps_the_mode_and_the_presets() {
        let managed = Managed {
            max_mode: Some(Mode::WorkspaceWrite),
            ..Managed::default()
        };
        let r = resolve(
            &flags(None, Some(Mode::FullAccess), None),
            &User::default(),
            &managed,
            &Project::default(),
            None,
        );
        assert!(matches!(r, Err(PolicyError::AboveCeiling { .. })));
        let managed = Managed {
            allowed_presets: Some(vec!["ci".into()]),
            ..Managed::default()
        };
        let r = resolve(
            &flags(Some("read-only"), None, None),
            &User::default(),
            &managed,
            &Project::default(),
            None,
        );
        assert!(matches!(r, Err(PolicyError::PresetNotAllowed { .. })));
    }

    #[test]
    fn inside_a_sandbox_approval_is_pinned_to_never() -> Result<(), PolicyError> {
        let parent = Parent {
            mode: Mode::ReadOnly,
            workspace: "/ws".into(),
            confinement: None,
        };
        let s = resolve(
            &flags(None, Some(Mode::FullAccess), None),
            &User::default(),
            &Managed::default(),
            &Project::default(),
            Some(&parent),
        )?;
        assert_eq!(
            (s.mode, s.approval, s.narrowed_from),
            (Mode::ReadOnly, Approval::Never, Some(Mode::FullAccess))
        );
        Ok(())
    }
}
