//! The host paths a configuration and the command line name: the grants that confine them,
//! the places judged, read-only shields, where each mount came from, the command line's
//! mounts and the named volumes.

use crate::config::metadata;
use crate::engine::{BuildRequest, Engine, MountKind};
use crate::ops::error::Result;
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::security::{
    self, Grants, Origins, PermissionRequest, SecurityProfile, Source, host_path,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The user's grants when the profile judges the host paths a repository names (`hardened`);
/// `None` under `reference`, which uses them as written (spec-note 0400).
pub(crate) fn confine_grants(profile: &SecurityProfile, grants: &Grants) -> Option<Grants> {
    matches!(profile, SecurityProfile::Hardened(_)).then(|| grants.clone())
}

/// Judges `build.dockerfile` and the build context of `request` on what they resolve to
/// ([`host_path::confine`], against the mounted workspace folder) and makes the request use
/// the resolved paths: a Dockerfile or context outside the workspace is neither read nor packed
/// (nor echoed in a build error) unless granted (`--allow mount:<resolved path>`).
///
/// Errors: [`OpsError::Security`] (`PathOutside`, `PathUnresolvable`).
pub(crate) fn confine_build(
    request: &mut BuildRequest,
    loaded: &LoadedConfiguration,
    grants: &Grants,
) -> Result<()> {
    let places = host_path::Places::new(&loaded.workspace.host_mount_root, None, None);
    let confine = |property: &str, p: &Path| {
        let absolute = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        host_path::confine(property, &absolute, &places, grants)
    };
    request.dockerfile = confine("build.dockerfile", &request.dockerfile)?;
    request.context = confine("build.context", &request.context)?;
    Ok(())
}

/// The workspace, host home and engine socket the policy judges `spec` against. Under
/// `hardened` they are resolved ([`host_path::Places`]) and every bind source of `spec` is
/// replaced by what it resolves to ([`host_path::resolve_binds`]): the policy judges, and the
/// engine mounts, the link's target, not the link (spec-note 0400). Under `reference` the
/// configuration's paths are kept as written.
pub(crate) fn judged_places(
    profile: &SecurityProfile,
    spec: &mut crate::engine::ContainerSpec,
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
    engine_socket: Option<&Path>,
) -> Result<(PathBuf, Option<PathBuf>, Option<PathBuf>), crate::security::SecurityError> {
    let home = opts.target.env.get("HOME").map(PathBuf::from);
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok((
            loaded.workspace.host_mount_root.clone(),
            home,
            engine_socket.map(Path::to_path_buf),
        ));
    }
    host_path::resolve_binds(spec)?;
    // what the command line mounts read-only (the handoff's git overlays) stays read-only
    // through the repository's other binds (spec-note 0413)
    let covers = covers(spec, opts);
    host_path::keep_read_only(
        spec,
        &uncovered(spec, &covers, cli_read_only_targets(opts, loaded)),
    );
    // what the command line covers (a repository's `.git`) stays covered through them too
    // (spec-note 0436)
    // devcell's own binds (the covers, the host `objects` a container git directory borrows,
    // the user's `--mount`s) are the command line's: left as they are
    let skip: Vec<String> = opts
        .covers
        .iter()
        .map(|(_, t)| t.clone())
        .chain(cli_read_only_targets(opts, loaded))
        .collect();
    host_path::keep_covered(spec, &covers, &skip);
    let places = host_path::Places::new(
        &loaded.workspace.host_mount_root,
        home.as_deref(),
        engine_socket,
    );
    Ok((places.workspace, places.home, places.engine_socket))
}

/// The targets of the command line's read-only binds ([`cli_mounts`]: the handoff's git
/// overlays, the user's own `--mount …,readonly`), which stay read-only through every other
/// bind (spec-note 0413).
pub(crate) fn cli_read_only_targets(opts: &UpOptions, loaded: &LoadedConfiguration) -> Vec<String> {
    cli_mounts(opts, loaded)
        .iter()
        .filter(|m| m.kind == crate::engine::MountKind::Bind && m.read_only)
        .map(|m| m.target.clone())
        .collect()
}

/// `targets` without those whose bind in `spec` has a source inside a covered host path (the
/// host `objects` a container git directory borrows): that path is covered wherever another
/// bind shows it, so its read-only bind needs no copy there (spec-note 0436).
pub(crate) fn uncovered(
    spec: &crate::engine::ContainerSpec,
    covers: &[host_path::Cover],
    targets: Vec<String>,
) -> Vec<String> {
    targets
        .into_iter()
        .filter(|t| {
            !spec.mounts.iter().any(|m| {
                m.target == *t
                    && m.source.as_deref().is_some_and(|s| {
                        covers
                            .iter()
                            .any(|c| c.hides_inside() && Path::new(s).starts_with(&c.covered))
                    })
            })
        })
        .collect()
}

/// The [`host_path::Cover`]s of `opts.covers` whose cover `spec` mounts (a bind at its
/// target), with that bind's source and mode.
pub(crate) fn covers(
    spec: &crate::engine::ContainerSpec,
    opts: &UpOptions,
) -> Vec<host_path::Cover> {
    opts.covers
        .iter()
        .filter_map(|(covered, target)| {
            let m = spec
                .mounts
                .iter()
                .find(|m| m.kind == crate::engine::MountKind::Bind && m.target == *target)?;
            let source = PathBuf::from(m.source.as_deref()?);
            Some(host_path::Cover {
                // a folder bound on itself (spec-note 0436, "Submodules", and the workspace)
                folder: source == *covered,
                covered: covered.clone(),
                source,
                read_only: m.read_only,
            })
        })
        .collect()
}

/// The read-only binds of `spec` (after [`judged_places`], so their sources are resolved) that
/// the command line asked for ([`cli_read_only_targets`]): `(host source, container target)`.
pub(crate) fn read_only_shields(
    spec: &crate::engine::ContainerSpec,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
) -> Vec<(PathBuf, String)> {
    let protected = cli_read_only_targets(opts, loaded);
    spec.mounts
        .iter()
        .filter(|m| m.kind == crate::engine::MountKind::Bind && m.read_only)
        .filter(|m| protected.contains(&m.target))
        .filter_map(|m| Some((PathBuf::from(m.source.as_deref()?), m.target.clone())))
        .collect()
}

/// `origins` with the folders devcell made for this container ([`UpOptions::owned_sources`],
/// resolved as the binds are).
pub(crate) fn with_owned(mut origins: Origins, opts: &UpOptions) -> Origins {
    origins.owned = opts
        .owned_sources
        .iter()
        .map(|p| {
            host_path::resolve(p)
                .unwrap_or_else(|_| p.clone())
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    origins
}

/// Who asked for what, from the metadata entries (image label entries, Feature entries with
/// `id`, the devcontainer.json entry last) and the `--mount` flags.
pub(crate) fn origins(entries: &[Value], cli_mounts: &[crate::engine::Mount]) -> Origins {
    let mut origins = Origins::default();
    let last = entries.len().saturating_sub(1);
    for (index, entry) in entries.iter().enumerate() {
        let source = match entry.get("id").and_then(Value::as_str) {
            Some(id) => Source::Feature(id.to_string()),
            None if index == last => Source::DevcontainerJson,
            None => Source::ImageMetadata,
        };
        let typed = metadata::MergedConfiguration::of(entry);
        if typed.privileged && origins.privileged.is_none() {
            origins.privileged = Some(source.clone());
        }
        for cap in &typed.cap_add {
            origins
                .capabilities
                .entry(security::policy::normalize_cap(cap))
                .or_insert_with(|| source.clone());
        }
        for opt in typed.security_opt {
            origins
                .security_opts
                .entry(opt)
                .or_insert_with(|| source.clone());
        }
        for mount in entry
            .get("mounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(target) = metadata::mount_target(mount) {
                origins.mounts.insert(target, source.clone());
            }
        }
        // An empty user does not take part in the merge, so it is no one's request.
        if typed.users.container_user.is_some() {
            origins.container_user = Some(source.clone());
        }
        if typed.users.remote_user.is_some() {
            origins.remote_user = Some(source.clone());
        }
    }
    for mount in cli_mounts {
        origins
            .mounts
            .insert(mount.target.clone(), Source::CommandLine);
    }
    origins
}

/// The mounts asked for on the command line: `--mount`s, then the worktree's common git dir
/// (`--mount-git-worktree-common-dir`). Granted by being asked for.
pub(crate) fn cli_mounts(
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
) -> Vec<crate::engine::Mount> {
    opts.mounts
        .iter()
        .cloned()
        .chain(loaded.additional_mount.clone())
        .collect()
}

/// The named volumes `spec` mounts, judged for the host workspace folder `workspace` under
/// `hardened` ([`security::volumes::classify`], spec-note 0444): a bind-backed one is turned
/// into a bind of its `device` (judged and resolved like every bind after this), a foreign one
/// is a [`security::Permission::Volume`] request. Returns the requests (judged) and the names
/// of the missing volumes, which devcell creates for this workspace once the policy accepts.
///
/// Errors: [`OpsError::Engine`] when a volume cannot be inspected.
pub(crate) async fn judge_named_volumes(
    engine: &dyn Engine,
    profile: &SecurityProfile,
    grants: &Grants,
    spec: &mut crate::engine::ContainerSpec,
    workspace: &Path,
) -> Result<(Vec<PermissionRequest>, Vec<String>)> {
    use security::volumes::{VolumeUse, classify};
    let mut foreign: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Volume)
    {
        let Some(name) = m.source.clone() else {
            continue;
        };
        match classify(engine.inspect_volume(&name).await?.as_ref(), workspace) {
            VolumeUse::Missing if !missing.contains(&name) => missing.push(name),
            VolumeUse::Foreign if !foreign.contains(&name) => foreign.push(name),
            VolumeUse::BindBacked(device) => {
                m.kind = MountKind::Bind;
                m.source = Some(device);
            }
            _ => {}
        }
    }
    Ok((security::volumes::judge(profile, grants, &foreign), missing))
}
