//! `handoff --group NAME` and `--cleanup on-exit|manual` (spec-note 0525): the handoffs of a
//! group share one container, each its own session; under `on-exit` the container is removed
//! when the group's last live member ends, never while another still runs.
//!
//! A container's image, mounts, capabilities, network and limits are fixed when it is created,
//! so a group's container can only serve handoffs that would have created the same container:
//! the group's [`GroupKey`] holds each of those, from the handoff's plan, and a handoff whose
//! key differs is refused before a session, each difference named ([`Difference`]).
//!
//! The group's record (`<state>/groups/<name>.json`, [`GroupStore`]) keeps the key, the policy,
//! the container and the members; every read-and-change of it happens under the group's file
//! lock (`<name>.lock`, `flock`), so two members ending together decide once. A member whose
//! devcell process is gone (a killed devcell: its pid dead, or reused by another process) is
//! not counted as live ([`Member::live`]).
//!
//! One workspace per group (spec-note 0525): the container binds one workspace root, and the
//! group's container is that workspace's container (the one its id labels find). A handoff of
//! another root is refused (`workspace` differs); a workspace whose container exists and is
//! not the group's is refused too, so `on-exit` never removes a container the group did not
//! make.

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::handoff::plan::HandoffPlan;

pub use crate::handoff::group_request::{Cleanup, GroupName, GroupRequest, resolve};

/// The version of a group record's shape.
pub const SCHEMA_VERSION: u32 = 1;

/// The most ended members a record keeps (the live ones are always kept).
const ENDED_MEMBERS_KEPT: usize = 20;

/// `--group` with what it cannot go with: the host runtime (no container to share),
/// clone isolation (each task has its own container), and `--container` (a container devcell
/// did not create is never removed, and a named one is the workspace's already).
///
/// # Errors
/// [`crate::ops::OpsError::Unsupported`] naming both flags.
pub fn refuse_combinations(
    opts: &crate::handoff::plan::HandoffOptions,
) -> Result<(), crate::ops::OpsError> {
    if opts.group.is_none() {
        return Ok(());
    }
    let other = if opts.runtime == Some(crate::handoff::context::AgentRuntime::Host) {
        "`--runtime host` (no container to share)"
    } else if opts.effective_isolation() == crate::settings::Isolation::Clone {
        "`--isolation clone` (each task has its own container)"
    } else if opts.container.is_some() {
        "`--container`"
    } else {
        return Ok(());
    };
    Err(crate::ops::OpsError::Unsupported {
        message: format!("`--group` cannot go with {other}"),
        hint: Some("drop one of the two flags".into()),
    })
}

/// What cannot change after a container's creation, field by field (`workspace`,
/// `configuration`, `image`, `features`, `profile`, `grants`, `network`, `egress`, `limits`,
/// `mounts`), each as text; the key is equal when every field is.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupKey(pub IndexMap<String, String>);

impl GroupKey {
    /// The key of the container `plan` would create. `config_sha256` is the `sha256:<hex>` of
    /// its `devcontainer.json` (`None`: unreadable, or no configuration).
    pub fn of(plan: &HandoffPlan, config_sha256: Option<&str>) -> GroupKey {
        let mounts = plan
            .mounts
            .iter()
            .map(|m| {
                let mode = if m.read_only { "ro" } else { "rw" };
                format!("{}:{}:{mode}", m.source, m.target)
            })
            .collect();
        let limits = match &plan.limits {
            Some(l) => format!(
                "pids {}, memory {} B, cpus {}",
                l.pids, l.memory_bytes, l.cpus
            ),
            None => "none".to_string(),
        };
        GroupKey::from_fields(KeyFields {
            workspace: plan.workspace.display().to_string(),
            configuration: config_sha256.unwrap_or("none").to_string(),
            image: plan.image.clone(),
            features: plan.features.clone(),
            profile: plan.profile.clone(),
            grants: plan.grants.clone(),
            network: plan.network.clone(),
            egress: plan.egress.clone(),
            limits,
            mounts,
        })
    }

    /// The key of `fields`. Lists (features, grants, egress, mounts) are sorted and listed
    /// once: their order does not change the container.
    pub fn from_fields(f: KeyFields) -> GroupKey {
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v.dedup();
            v.join(", ")
        };
        let fields = [
            ("workspace", f.workspace),
            ("configuration", f.configuration),
            ("image", f.image),
            ("features", sorted(f.features)),
            ("profile", f.profile),
            ("grants", sorted(f.grants)),
            ("network", f.network),
            ("egress", sorted(f.egress)),
            ("limits", f.limits),
            ("mounts", sorted(f.mounts)),
        ];
        GroupKey(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    /// `sha256:<hex>` of the key's canonical JSON (what `status` shows).
    pub fn sha256(&self) -> String {
        let bytes = serde_json::to_vec(&self.0).unwrap_or_default();
        crate::oci::digest::sha256_digest(&bytes)
    }
}

/// The fields of a [`GroupKey`], as a plan has them.
#[derive(Debug, Clone, Default)]
pub struct KeyFields {
    /// The workspace root on the host.
    pub workspace: String,
    /// The `sha256:<hex>` of `devcontainer.json`, or `none`.
    pub configuration: String,
    /// The image reference, or `build <Dockerfile>`.
    pub image: String,
    /// The Features asked for.
    pub features: Vec<String>,
    /// `hardened` or `reference`.
    pub profile: String,
    /// The user's grants in force.
    pub grants: Vec<String>,
    /// `none`, `allowlist` or `default`.
    pub network: String,
    /// The allowlist's destinations.
    pub egress: Vec<String>,
    /// The limits, as text.
    pub limits: String,
    /// Every mount the handoff adds, `source:target:ro|rw`.
    pub mounts: Vec<String>,
}

/// One field in which a handoff's key differs from its group's (the shape of spec-note 0520's
/// drift).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// The key's field (`network`, `mounts`, …).
    pub field: String,
    /// The group's value (empty when the group's key has no such field).
    pub group: String,
    /// The handoff's value.
    pub handoff: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |v: &str| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.to_string()
            }
        };
        write!(
            f,
            "{}: group {}, handoff {}",
            self.field,
            shown(&self.group),
            shown(&self.handoff)
        )
    }
}

/// Each field in which `handoff` differs from `group`, in the key's order (a field only one
/// side has counts, with the other side empty).
pub fn differences(group: &GroupKey, handoff: &GroupKey) -> Vec<Difference> {
    let mut out: Vec<Difference> = handoff
        .0
        .iter()
        .filter(|(k, v)| group.0.get(*k) != Some(*v))
        .map(|(k, v)| Difference {
            field: k.clone(),
            group: group.0.get(k).cloned().unwrap_or_default(),
            handoff: v.clone(),
        })
        .collect();
    out.extend(
        group
            .0
            .iter()
            .filter(|(k, _)| !handoff.0.contains_key(*k))
            .map(|(k, v)| Difference {
                field: k.clone(),
                group: v.clone(),
                handoff: String::new(),
            }),
    );
    out
}

/// One handoff of the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// Its session (`None` while the handoff has not begun it yet).
    pub session: Option<String>,
    /// The devcell process running it.
    pub pid: u32,
    /// That process's start time (clock ticks since boot), so a recycled pid is not taken for
    /// it; `None` where unknown.
    #[serde(default)]
    pub pid_start: Option<u64>,
    /// When it joined (RFC 3339, UTC).
    pub joined_at: String,
    /// When it ended (RFC 3339, UTC); `None` while it runs (or its devcell died).
    pub ended_at: Option<String>,
}

impl Member {
    /// Whether it counts as live: not ended, and its devcell process (pid and start time,
    /// asked of `alive`) still runs. A member whose devcell was killed is not counted.
    pub fn live(&self, alive: &dyn Fn(u32, Option<u64>) -> bool) -> bool {
        self.ended_at.is_none() && alive(self.pid, self.pid_start)
    }
}

/// A group's record, `<state>/groups/<name>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The group's name.
    pub name: GroupName,
    /// The workspace root the group's container binds.
    pub workspace: PathBuf,
    /// The group's policy.
    pub cleanup: Cleanup,
    /// The key of the group's container (of the handoff that started the group).
    pub key: GroupKey,
    /// [`GroupKey::sha256`] of `key`.
    pub key_sha256: String,
    /// The group's container, once a member brought it up; `None` before, and after `on-exit`
    /// or `delete` removed it.
    pub container_id: Option<String>,
    /// The members, in the order they joined.
    pub members: Vec<Member>,
}

impl GroupRecord {
    /// The members counted as live ([`Member::live`]).
    pub fn live_members<'a>(
        &'a self,
        alive: &'a dyn Fn(u32, Option<u64>) -> bool,
    ) -> impl Iterator<Item = &'a Member> + 'a {
        self.members.iter().filter(move |m| m.live(alive))
    }

    /// Whether the group still holds something: a container, or a live member. A group
    /// without either starts again with the next handoff's key and policy.
    fn holds(&self, alive: &dyn Fn(u32, Option<u64>) -> bool) -> bool {
        self.container_id.is_some() || self.live_members(alive).next().is_some()
    }
}

/// A group as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// The group's name.
    pub name: String,
    /// Its container (`None`: not brought up yet, or removed).
    pub container_id: Option<String>,
    /// `manual` or `on-exit`.
    pub cleanup: Cleanup,
    /// The key's fields.
    pub key: GroupKey,
    /// [`GroupKey::sha256`].
    pub key_sha256: String,
    /// The members, each with whether it is live.
    pub members: Vec<MemberStatus>,
}

/// A member as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// The member as recorded.
    #[serde(flatten)]
    pub member: Member,
    /// Whether it counts as live ([`Member::live`]).
    pub live: bool,
}

impl GroupStatus {
    /// One line for people: the group, its policy, container and members.
    pub fn line(&self) -> String {
        let live = self.members.iter().filter(|m| m.live).count();
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let who = m
                    .member
                    .session
                    .clone()
                    .unwrap_or_else(|| format!("pid {}", m.member.pid));
                format!("{who} {}", if m.live { "live" } else { "ended" })
            })
            .collect();
        format!(
            "handoff group `{}` (cleanup {}): container {}, {live} live of {} member(s){}",
            self.name,
            self.cleanup,
            self.container_id.as_deref().map_or("none", short),
            self.members.len(),
            if members.is_empty() {
                String::new()
            } else {
                format!(": {}", members.join(", "))
            }
        )
    }
}

/// The groups of `workspace` under the state root `root`, for `status`.
pub fn statuses(root: &Path, workspace: &Path) -> Vec<GroupStatus> {
    let alive = crate::handoff::state::process_alive;
    GroupStore::new(root)
        .of_workspace(workspace)
        .into_iter()
        .map(|r| GroupStatus {
            members: r
                .members
                .iter()
                .map(|m| MemberStatus {
                    live: m.live(&alive),
                    member: m.clone(),
                })
                .collect(),
            name: r.name.to_string(),
            container_id: r.container_id,
            cleanup: r.cleanup,
            key: r.key,
            key_sha256: r.key_sha256,
        })
        .collect()
}

/// Forgets every group of `workspace` under the state root `root` (for `delete`, which has
/// removed the workspace's container, the groups' one): each record removed under its lock.
/// Returns the groups' names; a record that cannot be removed is left (and not named).
pub fn forget(root: &Path, workspace: &Path) -> Vec<String> {
    let store = GroupStore::new(root);
    store
        .of_workspace(workspace)
        .into_iter()
        .filter(|r| {
            store
                .update(&r.name, |record| {
                    *record = None;
                    Ok(())
                })
                .is_ok()
        })
        .map(|r| r.name.to_string())
        .collect()
}

/// Why a handoff cannot join its group (exit 2, `invalid_argument`).
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The handoff would need another container than the group's.
    #[error("handoff group `{group}` runs a container this handoff cannot share: {}", list(.differences))]
    Differs {
        /// The group.
        group: String,
        /// Each field that differs.
        differences: Vec<Difference>,
    },
    /// Another cleanup policy than the group's.
    #[error(
        "handoff group `{group}` has cleanup `{group_policy}`, this handoff asks for `{handoff_policy}`"
    )]
    Policy {
        /// The group.
        group: String,
        /// The group's policy.
        group_policy: Cleanup,
        /// The policy the handoff asked for.
        handoff_policy: Cleanup,
    },
    /// The workspace's container exists and is not the group's.
    #[error(
        "the workspace's container {container} is not handoff group `{group}`'s: a group shares only the container its first handoff created"
    )]
    NotTheGroups {
        /// The group.
        group: String,
        /// The workspace's container (short id).
        container: String,
    },
    /// The record could not be read or written.
    #[error("handoff group record {}: {message}", .path.display())]
    Io {
        /// The record or its lock.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

fn list(d: &[Difference]) -> String {
    d.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl crate::ops::error::ProductError for GroupError {
    fn code(&self) -> crate::diagnostics::ErrorCode {
        match self {
            GroupError::Io { .. } => crate::diagnostics::ErrorCode::Internal,
            _ => crate::diagnostics::ErrorCode::InvalidArgument,
        }
    }

    fn details(&self) -> serde_json::Value {
        match self {
            GroupError::Differs { group, differences } => {
                serde_json::json!({"group": group, "differences": differences})
            }
            GroupError::Policy {
                group,
                group_policy,
                handoff_policy,
            } => serde_json::json!({
                "group": group,
                "differences": [Difference {
                    field: "cleanup".into(),
                    group: group_policy.to_string(),
                    handoff: handoff_policy.to_string(),
                }],
            }),
            GroupError::NotTheGroups { group, container } => {
                serde_json::json!({"group": group, "container": container})
            }
            GroupError::Io { .. } => serde_json::json!({}),
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            GroupError::Differs { .. } | GroupError::Policy { .. } => {
                "hand off with the group's settings, in another group (`--group`), or once the group's members have ended and its container is removed (`devcell delete`)".into()
            }
            GroupError::NotTheGroups { .. } => {
                "hand off without `--group`, or remove the workspace's container first (`devcell delete`)".into()
            }
            GroupError::Io { .. } => return None,
        })
    }
}

/// Whether a handoff with `key` and `request` may join the group whose record is `record`
/// (`None`: no record), given the container the workspace's labels find now
/// (`workspace_container`). Pure: the caller holds the group's lock.
///
/// A group that holds nothing (no container, no live member) starts again with this handoff.
/// Otherwise the key must be equal and the policy the group's; and a workspace container that
/// is not the group's recorded one is refused, whether the group has one or not.
///
/// # Errors
/// [`GroupError::Differs`], [`GroupError::Policy`], [`GroupError::NotTheGroups`].
pub fn admit(
    record: Option<&GroupRecord>,
    request: &GroupRequest,
    key: &GroupKey,
    workspace_container: Option<&str>,
    alive: &dyn Fn(u32, Option<u64>) -> bool,
) -> Result<(), GroupError> {
    let group = request.name.to_string();
    let held = record.filter(|r| r.holds(alive));
    if let Some(r) = held {
        let differences = differences(&r.key, key);
        if !differences.is_empty() {
            return Err(GroupError::Differs { group, differences });
        }
        if r.cleanup != request.cleanup {
            return Err(GroupError::Policy {
                group,
                group_policy: r.cleanup,
                handoff_policy: request.cleanup,
            });
        }
    }
    let not_the_groups = |c: &str| GroupError::NotTheGroups {
        group: group.clone(),
        container: short(c).to_string(),
    };
    match (held, workspace_container) {
        (_, None) => Ok(()),
        (None, Some(c)) => Err(not_the_groups(c)),
        (Some(r), Some(c)) => match r.container_id.as_deref() {
            Some(g) if g == c => Ok(()),
            Some(_) => Err(not_the_groups(c)),
            // a live member is bringing the group's container up: the one it finds is it
            None => Ok(()),
        },
    }
}

/// Records a new member (`pid`, `pid_start`) in `record`, starting the record anew (this key,
/// this policy, no container) when the group holds nothing. Returns the member's index.
pub fn join(
    record: &mut Option<GroupRecord>,
    request: &GroupRequest,
    workspace: &Path,
    key: &GroupKey,
    (pid, pid_start): (u32, Option<u64>),
    alive: &dyn Fn(u32, Option<u64>) -> bool,
) -> usize {
    let fresh = record.as_ref().is_none_or(|r| !r.holds(alive));
    if fresh {
        let members = record.take().map(|r| r.members).unwrap_or_default();
        *record = Some(GroupRecord {
            schema_version: SCHEMA_VERSION,
            name: request.name.clone(),
            workspace: workspace.to_path_buf(),
            cleanup: request.cleanup,
            key: key.clone(),
            key_sha256: key.sha256(),
            container_id: None,
            members,
        });
    }
    let r = record.as_mut().expect("set above");
    r.members.push(Member {
        session: None,
        pid,
        pid_start,
        joined_at: now(),
        ended_at: None,
    });
    prune_members(&mut r.members, alive);
    r.members
        .iter()
        .rposition(|m| m.pid == pid && m.ended_at.is_none() && m.session.is_none())
        .unwrap_or(r.members.len() - 1)
}

/// What the end of a member decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    /// Other members still run (their sessions, or their pids when they have none yet): the
    /// container stays.
    OthersLive(Vec<String>),
    /// The last live member ended under `on-exit`: this container is to be removed (the record
    /// no longer names it).
    Remove(String),
    /// The last live member ended under `manual`, or the group has no container: nothing is
    /// removed.
    Keep,
}

/// Ends the member of `pid` (and its `session`) in `record` and decides what becomes of the
/// container: removed only when no other member is live and the policy is `on-exit`.
pub fn leave(
    record: &mut GroupRecord,
    pid: u32,
    session: Option<&str>,
    alive: &dyn Fn(u32, Option<u64>) -> bool,
) -> Leave {
    let mine = |m: &Member| match (session, &m.session) {
        (Some(s), Some(t)) => s == t,
        _ => m.pid == pid && m.ended_at.is_none(),
    };
    let ended = now();
    for m in record.members.iter_mut().filter(|m| mine(m)) {
        m.ended_at.get_or_insert_with(|| ended.clone());
    }
    let others: Vec<String> = record
        .live_members(alive)
        .map(|m| {
            m.session
                .clone()
                .unwrap_or_else(|| format!("pid {}", m.pid))
        })
        .collect();
    if !others.is_empty() {
        return Leave::OthersLive(others);
    }
    match (record.cleanup, record.container_id.take()) {
        (Cleanup::OnExit, Some(c)) => Leave::Remove(c),
        (_, c) => {
            record.container_id = c;
            Leave::Keep
        }
    }
}

/// Keeps every live member and the last [`ENDED_MEMBERS_KEPT`] others.
fn prune_members(members: &mut Vec<Member>, alive: &dyn Fn(u32, Option<u64>) -> bool) {
    let ended = members.iter().filter(|m| !m.live(alive)).count();
    let mut drop = ended.saturating_sub(ENDED_MEMBERS_KEPT);
    members.retain(|m| {
        if drop > 0 && !m.live(alive) {
            drop -= 1;
            false
        } else {
            true
        }
    });
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The groups' records under a state root: `<root>/groups/<name>.json`, each changed only
/// under its `<name>.lock`.
#[derive(Debug, Clone)]
pub struct GroupStore {
    dir: PathBuf,
}

impl GroupStore {
    /// The store of the state root `root` (the handoff state's).
    pub fn new(root: &Path) -> GroupStore {
        GroupStore {
            dir: root.join("groups"),
        }
    }

    fn path(&self, name: &GroupName) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    fn io(&self, path: &Path, e: impl std::fmt::Display) -> GroupError {
        GroupError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }

    /// Runs `f` on the group's record (`None`: none yet) under the group's lock, then saves
    /// it (or removes the file when `f` left `None`). The lock is released when this returns.
    ///
    /// # Errors
    /// [`GroupError::Io`] (an unreadable or corrupt record), or `f`'s error (nothing saved).
    pub fn update<R>(
        &self,
        name: &GroupName,
        f: impl FnOnce(&mut Option<GroupRecord>) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| self.io(&self.dir, e))?;
        let lock_path = self.dir.join(format!("{name}.lock"));
        let lock =
            crate::ops::state_folder::lock_file(&lock_path).map_err(|e| self.io(&lock_path, e))?;
        let path = self.path(name);
        let before = self.load(name)?;
        let mut record = before.clone();
        let result = f(&mut record)?;
        if record != before {
            match &record {
                Some(r) => self.save(&path, r)?,
                None => match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(self.io(&path, e)),
                },
            }
        }
        drop(lock);
        Ok(result)
    }

    /// The group's record, read without the lock (for `status`); `None` when there is none.
    ///
    /// # Errors
    /// [`GroupError::Io`] (unreadable, corrupt).
    pub fn load(&self, name: &GroupName) -> Result<Option<GroupRecord>, GroupError> {
        let path = self.path(name);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| self.io(&path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(&path, e)),
        }
    }

    /// Every group whose record names `workspace` (for `status` and `delete`); unreadable
    /// records are left out.
    pub fn of_workspace(&self, workspace: &Path) -> Vec<GroupRecord> {
        let mut out = self.all();
        out.retain(|r| r.workspace == workspace);
        out
    }

    /// Every group's record, by name (for `doctor`); unreadable records are left out.
    pub fn all(&self) -> Vec<GroupRecord> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<GroupRecord> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let file = e.file_name().into_string().ok()?;
                let name = GroupName::try_from(file.strip_suffix(".json")?.to_string()).ok()?;
                self.load(&name).ok().flatten()
            })
            .collect();
        out.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        out
    }

    fn save(&self, path: &Path, record: &GroupRecord) -> Result<(), GroupError> {
        let mut bytes = serde_json::to_vec_pretty(record).map_err(|e| self.io(path, e))?;
        bytes.push(b'\n');
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(|e| self.io(path, e))?;
        tmp.write_all(&bytes).map_err(|e| self.io(path, e))?;
        tmp.as_file().sync_all().map_err(|e| self.io(path, e))?;
        tmp.persist(path).map_err(|e| self.io(path, e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
