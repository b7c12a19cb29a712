//! `doctor`: is this machine ready for handoffs, and what has been left behind (spec-note 0203)?
//!
//! Checks, each a [`Finding`] with a severity and, when something is wrong, a fix (an argv or a
//! manual step): the engine is reachable (and its version); cgroup limits (memory, pids, CPU)
//! can be enforced, so `hardened` limits mean something; dev containers whose workspace folder
//! is gone (orphans); bind mounts of devcell containers whose host source vanished (missing
//! mounts); devcell-built images no container uses (with their size and the `devcell prune`
//! command that removes them); stale handoff sessions, state of deleted workspaces and corrupt
//! state files; the cache folder's health.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::Engine;
use crate::handoff::envelope::NextAction;
use crate::handoff::state::{StateFinding, StateStore};
use crate::names::LOCAL_FOLDER_LABEL;
use crate::ops::error::Result;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Handoffs cannot work (or are not isolated) until fixed.
    Error,
    /// Something is left behind or degraded.
    Warning,
    /// All good.
    Ok,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable snake_case code (`engine_reachable`, `engine_unreachable`, `cgroup_limits`,
    /// `cgroup_limits_unenforced`, `orphaned_container`, `missing_mount`, `stale_session`,
    /// `workspace_gone`, `corrupt_state`, `orphaned_task`, `external_container`, `handoff_group`,
    /// `handoff_group_dead_member`, `handoff_group_stale`, `unused_mirror`, `cache_dir`, `cache_dir_unwritable`,
    /// `unused_image`, `images_unknown`).
    pub code: String,
    /// `error`, `warning` or `ok`.
    pub severity: Severity,
    /// What was found.
    pub message: String,
    /// How to fix it (absent for `ok`).
    pub fix: Option<NextAction>,
}

/// The engine as `doctor` saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineReport {
    /// Whether it answered.
    pub reachable: bool,
    /// Its version.
    pub version: Option<String>,
    /// Its API version.
    pub api_version: Option<String>,
    /// `true` for Podman.
    pub podman: bool,
    /// Its cgroup version (`1`, `2`).
    pub cgroup_version: Option<String>,
}

/// The result of [`doctor`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorResult {
    /// `true` when no finding is an error.
    pub healthy: bool,
    /// The engine.
    pub engine: EngineReport,
    /// Every check, errors first.
    pub findings: Vec<Finding>,
}

impl DoctorResult {
    /// The fixes of the findings, in order (for the envelope's `next_actions`).
    pub fn next_actions(&self) -> Vec<NextAction> {
        self.findings.iter().filter_map(|f| f.fix.clone()).collect()
    }
}

/// Inputs of [`doctor`].
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    /// The state folder (`None`: the default).
    pub state_root: Option<PathBuf>,
    /// The cache folder (`None`: `$XDG_CACHE_HOME/devcell`).
    pub cache_dir: Option<PathBuf>,
}

/// Runs every check (the engine at `DOCKER_HOST`; an unreachable engine is a finding, not an
/// error).
///
/// Errors: `State` when the state folder cannot be listed.
pub async fn doctor(opts: &DoctorOptions) -> Result<DoctorResult> {
    match crate::engine::connect().await {
        Ok(engine) => doctor_with(Some(&*engine), opts).await,
        Err(e) => {
            let mut r = doctor_with(None, opts).await?;
            if let Some(f) = r
                .findings
                .iter_mut()
                .find(|f| f.code == "engine_unreachable")
            {
                f.message = format!("no container engine is reachable: {e}");
            }
            Ok(r)
        }
    }
}

fn finding(code: &str, severity: Severity, message: String, fix: Option<NextAction>) -> Finding {
    Finding {
        code: code.into(),
        severity,
        message,
        fix,
    }
}

/// [`doctor`] through `engine` (`None`: unreachable).
///
/// Errors: as [`doctor`].
pub async fn doctor_with(
    engine: Option<&dyn Engine>,
    opts: &DoctorOptions,
) -> Result<DoctorResult> {
    let mut findings = Vec::new();
    let mut report = EngineReport::default();
    let mut running: HashSet<String> = HashSet::new();
    let store = match &opts.state_root {
        Some(r) => StateStore::new(r),
        None => StateStore::open_default()?,
    };
    let external = external_containers(&store);
    let engine_ok = check_engine(engine, &mut report, &mut findings).await;
    if let Some(engine) = engine_ok {
        check_cgroups(engine, &mut report, &mut findings).await;
        check_containers(engine, &external, &mut running, &mut findings).await;
        check_external(engine, &external, &mut running, &mut findings).await;
        check_groups(engine, store.root(), &mut findings).await;
        check_egress_proxies(engine, &mut findings).await;
        check_images(engine, &mut findings).await;
    }
    check_state(&store, engine_ok.is_some(), &running, &mut findings)?;
    check_tasks(opts, &store, &mut findings);
    check_cache(opts, &mut findings);
    findings.sort_by_key(|f| f.severity);
    Ok(DoctorResult {
        healthy: !findings.iter().any(|f| f.severity == Severity::Error),
        engine: report,
        findings,
    })
}

/// Whether the engine answers (its version in `report`); returns it when it does.
async fn check_engine<'e>(
    engine: Option<&'e dyn Engine>,
    report: &mut EngineReport,
    findings: &mut Vec<Finding>,
) -> Option<&'e dyn Engine> {
    let mut engine_ok = None;
    if let Some(engine) = engine {
        match engine.version().await {
            Ok(v) => {
                report.reachable = true;
                report.version = Some(v.version.clone());
                report.api_version = Some(v.api_version.clone());
                report.podman = v.podman;
                findings.push(finding(
                    "engine_reachable",
                    Severity::Ok,
                    format!(
                        "{} {} (API {}) is reachable",
                        if v.podman { "Podman" } else { "Docker" },
                        v.version,
                        v.api_version
                    ),
                    None,
                ));
                engine_ok = Some(engine);
            }
            Err(e) => findings.push(unreachable(&e.to_string())),
        }
    } else {
        findings.push(unreachable("no container engine is reachable"));
    }

    engine_ok
}

/// Whether the engine enforces the memory, pids and CPU limits (its cgroup version in
/// `report`).
async fn check_cgroups(
    engine: &dyn Engine,
    report: &mut EngineReport,
    findings: &mut Vec<Finding>,
) {
    match engine.info().await {
        Ok(info) => {
            report.cgroup_version = Some(info.cgroup_version.clone()).filter(|v| !v.is_empty());
            let limits = info.enforced_limits;
            let missing: Vec<&str> = [
                (limits.memory, "memory"),
                (limits.pids, "pids"),
                (limits.cpu, "CPU"),
            ]
            .into_iter()
            .filter(|(enforced, _)| !enforced)
            .map(|(_, name)| name)
            .collect();
            if missing.is_empty() {
                findings.push(finding(
                    "cgroup_limits",
                    Severity::Ok,
                    format!(
                        "memory, pids and CPU limits are enforced (cgroup v{})",
                        report.cgroup_version.as_deref().unwrap_or("?")
                    ),
                    None,
                ));
            } else {
                findings.push(finding(
                    "cgroup_limits_unenforced",
                    Severity::Error,
                    format!(
                        "the engine cannot enforce {} limits: `hardened` limits would be silently ignored",
                        missing.join(", ")
                    ),
                    Some(NextAction::manual(
                        "enable the missing cgroup controllers (cgroup v2: `memory pids cpu` in cgroup.subtree_control; a rootless engine needs systemd delegation) and restart the engine",
                    )),
                ));
            }
        }
        Err(e) => findings.push(finding(
            "cgroup_limits_unknown",
            Severity::Warning,
            format!("cannot ask the engine about cgroup limits: {e}"),
            None,
        )),
    }
}

/// Containers of workspaces that no longer exist, and binds whose host source is gone;
/// `running` gets the ids of the running ones.
async fn check_containers(
    engine: &dyn Engine,
    external: &[(PathBuf, String)],
    running: &mut HashSet<String>,
    findings: &mut Vec<Finding>,
) {
    if let Ok(containers) = engine
        .find_containers_with_label_key(LOCAL_FOLDER_LABEL)
        .await
    {
        for c in containers {
            if c.state == "running" {
                running.insert(c.id.clone());
            }
            // someone else's container is never devcell's to remove or recreate
            if external.iter().any(|(_, id)| *id == c.id) {
                continue;
            }
            let Some(folder) = c.labels.get(LOCAL_FOLDER_LABEL) else {
                continue;
            };
            let short = &c.id[..c.id.len().min(12)];
            if !Path::new(folder).is_dir() {
                findings.push(finding(
                    "orphaned_container",
                    Severity::Warning,
                    format!(
                        "container {short} ({}) belongs to workspace `{folder}`, which no longer exists",
                        c.state
                    ),
                    Some(NextAction::command(
                        format!("remove the orphaned container {short} and its volumes"),
                        ["docker", "rm", "-f", "-v", c.id.as_str()],
                    )),
                ));
                continue;
            }
            if let Ok(Some(info)) = engine.inspect_container(&c.id).await {
                for m in info
                    .mounts
                    .iter()
                    .filter(|m| m.kind == "bind" && !Path::new(&m.source).exists())
                {
                    findings.push(finding(
                        "missing_mount",
                        Severity::Warning,
                        format!(
                            "container {short} of `{folder}` binds `{}` at `{}`, which no longer exists on the host",
                            m.source, m.destination
                        ),
                        Some(NextAction::command(
                            "recreate the workspace container",
                            [
                                "devcell",
                                "delete",
                                "--workspace-folder",
                                folder.as_str(),
                            ],
                        )),
                    ));
                }
            }
        }
    }
}

/// The containers devcell did not create that handoff sessions ran in (`handoff
/// --container`, spec-note 0524), with their workspaces.
fn external_containers(store: &StateStore) -> Vec<(PathBuf, String)> {
    let Ok((states, _)) = store.list() else {
        return Vec::new();
    };
    states
        .iter()
        .flat_map(|s| {
            crate::handoff::agent::external_containers(Some(s))
                .into_iter()
                .map(|id| (s.workspace.clone(), id))
        })
        .collect()
}

/// Each external container reported as someone else's (`external_container`, never a fix
/// that stops or removes it); a running one keeps its sessions live.
async fn check_external(
    engine: &dyn Engine,
    external: &[(PathBuf, String)],
    running: &mut HashSet<String>,
    findings: &mut Vec<Finding>,
) {
    for (workspace, id) in external {
        let info = engine.inspect_container(id).await.ok().flatten();
        let state = match &info {
            Some(i) if i.running => {
                running.insert(i.id.clone());
                "running"
            }
            Some(_) => "not running",
            None => "gone",
        };
        findings.push(finding(
            "external_container",
            Severity::Ok,
            format!(
                "container {} ({state}) of workspace `{}` is external: someone else owns it; devcell never starts, stops or removes it, and `devcell delete` only forgets it",
                short_id(id),
                workspace.display()
            ),
            None,
        ));
    }
}

/// What the engine says of a group's container, for [`group_findings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Running,
    Stopped,
    Gone,
}

/// Each handoff group of the state root `root` (spec-note 0528), its container asked of
/// `engine`: see [`group_findings`].
async fn check_groups(engine: &dyn Engine, root: &Path, findings: &mut Vec<Finding>) {
    let records = crate::handoff::group::GroupStore::new(root).all();
    let mut seen = std::collections::HashMap::new();
    for id in records.iter().filter_map(|r| r.container_id.clone()) {
        let state = match engine.inspect_container(&id).await {
            Ok(Some(i)) if i.running => Seen::Running,
            Ok(Some(_)) => Seen::Stopped,
            Ok(None) => Seen::Gone,
            // unknown: judged as neither gone nor there
            Err(_) => continue,
        };
        seen.insert(id, state);
    }
    findings.extend(group_findings(
        &records,
        &crate::handoff::state::process_alive,
        &|id| seen.get(id).copied(),
    ));
}

/// The findings of the group `records`: each group (`handoff_group`, ok: its policy, container
/// and members); each member that never ended but whose devcell process is gone
/// (`handoff_group_dead_member`, warning: it is not counted, and under `on-exit` its death
/// means nobody removes the container while no other member runs); and a group that holds
/// nothing any more or that `on-exit` should have emptied (`handoff_group_stale`, warning): no
/// live member and its container gone (or never made), or under `on-exit` still there.
/// `alive` judges a member's devcell (pid and start time); `container` is what the engine says
/// of an id (`None`: unknown, then nothing is judged stale).
fn group_findings(
    records: &[crate::handoff::group::GroupRecord],
    alive: &dyn Fn(u32, Option<u64>) -> bool,
    container: &dyn Fn(&str) -> Option<Seen>,
) -> Vec<Finding> {
    use crate::handoff::group_request::Cleanup;
    let mut out = Vec::new();
    for r in records {
        let workspace = r.workspace.display().to_string();
        let live = r.live_members(alive).count();
        let seen = r.container_id.as_deref().map(|id| (id, container(id)));
        let shown = match seen {
            None => "none".to_string(),
            Some((id, Some(Seen::Running))) => format!("{} (running)", short_id(id)),
            Some((id, Some(Seen::Stopped))) => format!("{} (stopped)", short_id(id)),
            Some((id, Some(Seen::Gone))) => format!("{} (gone)", short_id(id)),
            Some((id, None)) => format!("{} (unknown)", short_id(id)),
        };
        out.push(finding(
            "handoff_group",
            Severity::Ok,
            format!(
                "handoff group `{}` of workspace `{workspace}` (cleanup {}): container {shown}, {live} live of {} member(s)",
                r.name,
                r.cleanup,
                r.members.len()
            ),
            None,
        ));
        for m in r
            .members
            .iter()
            .filter(|m| m.ended_at.is_none() && !m.live(alive))
        {
            out.push(finding(
                "handoff_group_dead_member",
                Severity::Warning,
                format!(
                    "member {} of handoff group `{}` never ended: its devcell (pid {}) is gone, so it is not counted",
                    m.session.as_deref().unwrap_or("(no session yet)"),
                    r.name,
                    m.pid
                ),
                Some(NextAction::manual(
                    "nothing runs for it; its session shows as stale in `devcell status`, and the group's next member to end (or `devcell delete`) settles the group",
                )),
            ));
        }
        let stale = live == 0
            && match seen {
                None | Some((_, Some(Seen::Gone))) => true,
                Some((_, Some(_))) => r.cleanup == Cleanup::OnExit,
                Some((_, None)) => false,
            };
        if stale {
            let why = match seen {
                Some((id, Some(Seen::Running | Seen::Stopped))) => format!(
                    "its cleanup is on-exit, but no member is live and its container {} is still there (its last member's devcell died before it could remove it)",
                    short_id(id)
                ),
                _ => "no member is live and its container is gone: the record holds nothing".into(),
            };
            out.push(finding(
                "handoff_group_stale",
                Severity::Warning,
                format!(
                    "handoff group `{}` of workspace `{workspace}`: {why}",
                    r.name
                ),
                Some(NextAction::command(
                    format!(
                        "remove the workspace's container and forget its groups (`{}`)",
                        r.name
                    ),
                    [
                        "devcell",
                        "delete",
                        "--workspace-folder",
                        workspace.as_str(),
                    ],
                )),
            ));
        }
    }
    out
}

/// Egress proxies whose container is gone (spec-note 0502).
async fn check_egress_proxies(engine: &dyn Engine, findings: &mut Vec<Finding>) {
    let Some(state) = crate::ops::state_folder::default_root() else {
        return;
    };
    for p in crate::ops::egress::proxies(&state) {
        let Some(pid) = p.pid else { continue };
        let gone = p.config.container_id.is_empty()
            || matches!(
                engine.inspect_container(&p.config.container_id).await,
                Ok(None)
            );
        if gone {
            let short = &p.config.container_id[..p.config.container_id.len().min(12)];
            findings.push(finding(
                "orphaned_egress_proxy",
                Severity::Warning,
                format!(
                    "egress proxy {pid} (`{}`) serves container {short}, which no longer exists",
                    p.folder.display()
                ),
                Some(NextAction::command(
                    format!("stop the orphaned egress proxy {pid}"),
                    ["kill".to_string(), pid.to_string()],
                )),
            ));
        }
    }
}

/// devcell-built images no container uses (spec-note 0272).
async fn check_images(engine: &dyn Engine, findings: &mut Vec<Finding>) {
    match crate::handoff::prune::devcell_images(engine).await {
        Ok(images) => {
            for image in images.iter().filter(|i| i.used_by.is_empty()) {
                findings.push(finding(
                    "unused_image",
                    Severity::Warning,
                    format!(
                        "devcell-built image `{}` ({}, {}) is used by no container",
                        image.reference,
                        crate::handoff::prune::human_size(image.size),
                        short_id(&image.id)
                    ),
                    Some(NextAction::command(
                        format!("remove the unused image `{}`", image.reference),
                        ["devcell", "prune", "--image", image.reference.as_str()],
                    )),
                ));
            }
        }
        Err(e) => findings.push(finding(
            "images_unknown",
            Severity::Warning,
            format!("cannot list devcell-built images: {e}"),
            None,
        )),
    }
}

/// The handoff state's findings (stale sessions, gone workspaces, corrupt state); without an
/// engine every recorded container counts as running.
fn check_state(
    store: &StateStore,
    engine_ok: bool,
    running: &HashSet<String>,
    findings: &mut Vec<Finding>,
) -> Result<()> {
    let probe = |id: &str| {
        !engine_ok
            || running
                .iter()
                .any(|r| r.starts_with(id) || id.starts_with(r.as_str()))
    };
    let state_findings = store.findings(&probe, &crate::handoff::state::process_alive)?;
    for f in state_findings {
        let fix = match &f {
            StateFinding::StaleSession { workspace, .. } => NextAction::command(
                f.fix(),
                [
                    "devcell".to_string(),
                    "status".to_string(),
                    "--workspace-folder".to_string(),
                    workspace.to_string_lossy().into_owned(),
                ],
            ),
            StateFinding::WorkspaceGone {
                workspace,
                container_id: Some(_),
                ..
            } => NextAction::command(
                f.fix(),
                [
                    "devcell".to_string(),
                    "delete".to_string(),
                    "--workspace-folder".to_string(),
                    workspace.to_string_lossy().into_owned(),
                ],
            ),
            _ => NextAction::manual(f.fix()),
        };
        findings.push(finding(f.code(), Severity::Warning, f.message(), Some(fix)));
    }

    Ok(())
}

/// Clone tasks no handoff can use any more (spec-note 0437).
fn check_tasks(opts: &DoctorOptions, store: &StateStore, findings: &mut Vec<Finding>) {
    for orphan in crate::handoff::task::orphans::find(store.root()) {
        let fix = if orphan.unfetched.is_some() {
            NextAction::manual(format!(
                "its clone holds commits never fetched: copy them out of `{}`, then remove the folder",
                orphan.folder.display()
            ))
        } else {
            NextAction::command(
                "remove orphaned clone tasks",
                ["devcell", "prune", "--tasks"],
            )
        };
        findings.push(finding(
            "orphaned_task",
            Severity::Warning,
            orphan.message,
            Some(fix),
        ));
    }
    // the mirrors are in the cache folder `check_cache` reports
    let Some(cache) = opts
        .cache_dir
        .clone()
        .or_else(|| dirs::cache_dir().map(|d| d.join("devcell")))
    else {
        return;
    };
    for mirror in crate::handoff::task::mirror::unused(&cache, store.root()) {
        findings.push(finding(
            "unused_mirror",
            Severity::Warning,
            format!("clone mirror `{}` is used by no task", mirror.display()),
            Some(NextAction::command(
                "remove unused mirrors",
                ["devcell", "prune", "--tasks"],
            )),
        ));
    }
}

/// Whether the cache folder is writable.
fn check_cache(opts: &DoctorOptions, findings: &mut Vec<Finding>) {
    let cache = opts
        .cache_dir
        .clone()
        .or_else(|| dirs::cache_dir().map(|d| d.join("devcell")));
    match cache {
        Some(dir) if dir.is_dir() => {
            let probe = dir.join(format!(".devcell-doctor-{}", std::process::id()));
            match std::fs::write(&probe, b"") {
                Ok(()) => {
                    let _ = std::fs::remove_file(&probe);
                    findings.push(finding(
                        "cache_dir",
                        Severity::Ok,
                        format!(
                            "cache folder `{}` is writable ({} bytes)",
                            dir.display(),
                            dir_size(&dir)
                        ),
                        None,
                    ));
                }
                Err(e) => findings.push(finding(
                    "cache_dir_unwritable",
                    Severity::Error,
                    format!("cache folder `{}` is not writable: {e}", dir.display()),
                    Some(NextAction::manual(format!(
                        "fix the permissions of `{}` or remove it (devcell recreates it)",
                        dir.display()
                    ))),
                )),
            }
        }
        Some(dir) if dir.exists() => findings.push(finding(
            "cache_dir_unwritable",
            Severity::Error,
            format!("cache path `{}` is not a folder", dir.display()),
            Some(NextAction::manual(format!("remove `{}`", dir.display()))),
        )),
        Some(dir) => findings.push(finding(
            "cache_dir",
            Severity::Ok,
            format!("cache folder `{}` not created yet", dir.display()),
            None,
        )),
        None => findings.push(finding(
            "cache_dir_unwritable",
            Severity::Warning,
            "no cache folder can be determined (no `HOME`)".into(),
            Some(NextAction::manual("set `XDG_CACHE_HOME` or `HOME`")),
        )),
    }
}

fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    &hex[..hex.len().min(12)]
}

fn unreachable(message: &str) -> Finding {
    finding(
        "engine_unreachable",
        Severity::Error,
        message.to_string(),
        Some(NextAction::manual(
            "start the Docker engine (`dockerd`) or point `DOCKER_HOST` at a running one (Podman: its Docker-compatible socket)",
        )),
    )
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::group::{GroupKey, GroupRecord, GroupStore, KeyFields, Member};
    use crate::handoff::group_request::{Cleanup, GroupName};

    /// A member of devcell process `pid`, ended or not.
    fn member(session: &str, pid: u32, ended: bool) -> Member {
        Member {
            session: Some(session.into()),
            pid,
            pid_start: None,
            joined_at: "2026-01-01T00:00:00Z".into(),
            ended_at: ended.then(|| "2026-01-01T01:00:00Z".into()),
        }
    }

    /// Writes group `name` of `/w` into the state folder `root` as a handoff would.
    fn write(root: &Path, name: &str, cleanup: Cleanup, container: Option<&str>, m: Vec<Member>) {
        let key = GroupKey::from_fields(KeyFields {
            workspace: "/w".into(),
            configuration: "sha256:aa".into(),
            image: "busybox".into(),
            features: Vec::new(),
            profile: "hardened".into(),
            grants: Vec::new(),
            network: "none".into(),
            egress: Vec::new(),
            limits: String::new(),
            mounts: Vec::new(),
        });
        let name = GroupName::try_from(name.to_string()).unwrap();
        GroupStore::new(root)
            .update(&name, |r| {
                *r = Some(GroupRecord {
                    schema_version: crate::handoff::group::SCHEMA_VERSION,
                    name: name.clone(),
                    workspace: "/w".into(),
                    cleanup,
                    key_sha256: key.sha256(),
                    key: key.clone(),
                    container_id: container.map(str::to_string),
                    members: m,
                });
                Ok(())
            })
            .unwrap();
    }

    /// Over a state folder: every group reported with its members; a member whose devcell
    /// died (pid 99) named; a group holding nothing, and an `on-exit` group whose container
    /// outlived its last member, reported stale with `devcell delete` as the fix; a `manual`
    /// group whose container stays (as it should) and a live group are not.
    #[test]
    fn doctor_reports_each_group_its_dead_members_and_stale_records() {
        let state = tempfile::tempdir().unwrap();
        let root = state.path();
        write(
            root,
            "live",
            Cleanup::OnExit,
            Some("aaaaaaaaaaaaaaaa"),
            vec![member("s1", 10, false), member("s2", 99, false)],
        );
        write(
            root,
            "kept",
            Cleanup::Manual,
            Some("bbbbbbbbbbbbbbbb"),
            vec![member("s3", 11, true)],
        );
        write(
            root,
            "empty",
            Cleanup::Manual,
            Some("cccccccccccccccc"),
            vec![member("s4", 12, true)],
        );
        write(
            root,
            "left",
            Cleanup::OnExit,
            Some("dddddddddddddddd"),
            vec![member("s5", 99, false)],
        );
        let records = GroupStore::new(root).all();
        assert_eq!(records.len(), 4);
        let alive = |pid: u32, _: Option<u64>| pid != 99;
        let container = |id: &str| match &id[..1] {
            "c" => Some(Seen::Gone),
            "b" => Some(Seen::Stopped),
            _ => Some(Seen::Running),
        };
        let found = group_findings(&records, &alive, &container);
        let of =
            |code: &str| -> Vec<&Finding> { found.iter().filter(|f| f.code == code).collect() };

        let groups = of("handoff_group");
        assert_eq!(groups.len(), 4, "{found:#?}");
        assert!(
            groups.iter().any(|f| f.message.contains("`live`")
                && f.message
                    .contains("aaaaaaaaaaaa (running), 1 live of 2 member(s)")),
            "{found:#?}"
        );

        let dead = of("handoff_group_dead_member");
        let dead: Vec<&str> = dead.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(dead.len(), 2, "{dead:?}");
        assert!(
            dead[0].contains("member s5 of handoff group `left`") || dead[1].contains("member s5")
        );
        assert!(
            dead.iter()
                .any(|m| m.contains("member s2 of handoff group `live`"))
        );

        let stale = of("handoff_group_stale");
        let names: Vec<&str> = stale
            .iter()
            .map(|f| {
                if f.message.contains("`empty`") {
                    "empty"
                } else if f.message.contains("`left`") {
                    "left"
                } else {
                    "other"
                }
            })
            .collect();
        assert_eq!(names, ["empty", "left"], "{stale:#?}");
        for f in &stale {
            assert_eq!(f.severity, Severity::Warning);
            assert_eq!(
                f.fix.as_ref().and_then(|a| a.command.clone()).unwrap(),
                ["devcell", "delete", "--workspace-folder", "/w"]
            );
        }
        assert!(
            stale[1].message.contains("dddddddddddd is still there"),
            "{stale:#?}"
        );

        // an engine that did not answer: nothing is judged stale by its container
        let unknown = group_findings(&records, &alive, &|_| None);
        assert!(
            unknown.iter().all(|f| f.code != "handoff_group_stale"),
            "{unknown:#?}"
        );
    }
}
