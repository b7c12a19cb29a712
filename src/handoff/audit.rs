//! `audit`: score any container (made by devcell or not) against the isolation blueprint's
//! eight controls ([`crate::security::audit`]), from the engine's description of it or, with
//! `--probe`, from what a process inside observes ([`crate::security::probe`]) (spec-note 0205).
//!
//! The host side of the audit context is derived here ([`crate::ops::audit_context`]), never
//! taken from the container's word alone: the user's home and `$XDG_RUNTIME_DIR` from this process; the workspace from
//! `--workspace-folder` or the container's `devcontainer.local_folder` label; its mount target
//! from the container's bind of that folder; the Features lockfile beside the
//! `devcontainer.config_file` label's file; and, when the workspace folder exists on this host,
//! its repositories' git directories ([`super::repository::inspect`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine::{ContainerInfo, Engine, ExecInput, ExecOutput, ExecRequest};
use crate::handoff::repository::{self, InspectOptions};
use crate::names::LOCAL_FOLDER_LABEL;
use crate::ops::audit_context::{context_for, resolved_binds};
use crate::ops::error::{OpsError, Result};
use crate::security::audit::{self as scoring, ContainerFacts};
use crate::security::probe::{audit_probe, parse_probe_output, probe_command};

/// The report [`audit`] returns and what it is made of, for callers that render it.
pub use crate::security::audit::{AuditReport, Control, ControlScore, Evidence, FactsSource, Risk};

/// Inputs of [`audit`].
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// A container name or id.
    pub container: Option<String>,
    /// Or the workspace whose dev container to audit.
    pub workspace_folder: Option<PathBuf>,
    /// Ask from inside (`--probe`): the container must be running and have a POSIX `sh`.
    pub probe: bool,
}

/// Audits the container at `DOCKER_HOST`.
///
/// Errors: as [`audit_with`].
pub async fn audit(opts: &AuditOptions) -> Result<AuditReport> {
    let engine = crate::engine::connect().await?;
    audit_with(&*engine, opts).await
}

/// A Compose workspace's report covers every container of its project (issue 14 item 5):
/// each sidecar audited as itself, and what the services share on the network said plainly
/// (spec-note 0606).
async fn compose_services(
    engine: &dyn Engine,
    container: &ContainerInfo,
    opts: &AuditOptions,
    report: &mut AuditReport,
) -> Result<()> {
    let labels = &container.labels;
    let siblings = crate::ops::compose::project_siblings(engine, labels, &container.id).await?;
    if labels.contains_key(crate::engine::compose::PROJECT_LABEL) {
        // what the engine says of the primary's networks, not the label's word alone
        let mode = crate::ops::compose_network::ComposeNetwork::of_labels(labels);
        let attached = &container.networks;
        let closed = closed_networks(engine, container).await?;
        let note = if mode.closed() && !attached.is_empty() && closed.len() == attached.len() {
            mode.note()
        } else {
            crate::ops::compose::COMPOSE_NETWORK_NOTE
        };
        report.network = Some(note.to_string());
    }
    for sibling in siblings {
        let one = AuditOptions {
            container: Some(sibling.id),
            workspace_folder: None,
            probe: opts.probe,
        };
        report
            .services
            .push(Box::pin(audit_with(engine, &one)).await?);
    }
    Ok(())
}

/// Audits through `engine`.
///
/// Errors: [`OpsError::NoSuchContainer`] (no such container, or no container for the
/// workspace), [`OpsError::NotRunning`] (`--probe` on a stopped container),
/// [`OpsError::Audit`] (unreadable inspect or probe output), `Engine`.
pub async fn audit_with(engine: &dyn Engine, opts: &AuditOptions) -> Result<AuditReport> {
    let id = match (&opts.container, &opts.workspace_folder) {
        (Some(c), _) => c.clone(),
        (None, Some(folder)) => {
            let root = std::fs::canonicalize(folder).map_err(|_| OpsError::WorkspaceFolder {
                path: folder.clone(),
            })?;
            let labels = BTreeMap::from([(
                LOCAL_FOLDER_LABEL.to_string(),
                root.to_string_lossy().into_owned(),
            )]);
            let found = engine.find_containers(&labels).await?;
            // only a container that binds the workspace is its own (spec-note 0421)
            crate::security::identity::bound_to_workspace(
                engine,
                found,
                std::slice::from_ref(&root),
            )
            .await?
            .0
            .into_iter()
            .find(|c| c.state != "removing")
            .map(|c| c.id)
            .ok_or_else(|| OpsError::NoSuchContainer {
                id: String::new(),
                workspace: Some(root.clone()),
            })?
        }
        (None, None) => {
            return Err(OpsError::Unsupported {
                message: "nothing to audit: give a container or `--workspace-folder`".into(),
                hint: None,
            });
        }
    };
    let container =
        engine
            .inspect_container(&id)
            .await?
            .ok_or_else(|| OpsError::NoSuchContainer {
                id: id.clone(),
                workspace: None,
            })?;
    let image = if container.image.is_empty() {
        None
    } else {
        engine.inspect_image(&container.image).await?
    };
    let mut ctx = context_for(
        &container,
        opts.workspace_folder.as_deref(),
        &workspace_git_dirs,
    );
    ctx.internal_networks = closed_networks(engine, &container).await?;
    let mut engine_facts = resolved_binds(ContainerFacts::from_container(&container));
    if let Some(image) = &image {
        engine_facts = engine_facts.with_image(image);
    }
    // A base the container's label names is checked against the image's layers, not trusted.
    if let Some(base) = engine_facts.pinned_base_label().map(str::to_string)
        && let Some(base) = engine.inspect_image(&base).await?
    {
        engine_facts = engine_facts.with_base_image(&base);
    }
    let mail = mail_channel(&container);
    if !opts.probe {
        let mut report = scoring::audit(&engine_facts, &ctx);
        report.mail = mail;
        if opts.workspace_folder.is_some() {
            compose_services(engine, &container, opts, &mut report).await?;
        }
        return Ok(report);
    }
    if !container.running {
        return Err(OpsError::NotRunning { id });
    }
    let ws = ctx
        .container_workspace
        .clone()
        .unwrap_or_else(|| "/workspace".into());
    let result = engine
        .exec(
            &id,
            &ExecRequest {
                argv: probe_command(&ws),
                ..ExecRequest::default()
            },
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await?;
    // a cut answer is refused, never read as a whole one (spec-note 0658)
    if result.cut {
        return Err(OpsError::Unsupported {
            message: format!(
                "the audit probe's output in container {id} passed {} KiB: not read",
                crate::engine::COLLECT_CAP / 1024
            ),
            hint: None,
        });
    }
    let probe = parse_probe_output(&result.stdout_text())?;
    let mut report = audit_probe(&probe, &ctx, Some(&engine_facts));
    report.container = report.container.or(Some(id));
    report.mail = mail;
    Ok(report)
}

/// The container's mail channel (spec-note 0532): the bind at the socket folder's container
/// path, the command's, and the channel record of the handoff session that ran in this
/// container (found in the state of the workspace its label names).
pub fn mail_channel(container: &ContainerInfo) -> Option<scoring::MailChannel> {
    use crate::handoff::door::channel::{CONTAINER_BIN, CONTAINER_FOLDER, SOCKET_NAME};
    let bind_at = |target: &str| container.mounts.iter().find(|m| m.destination == target);
    let folder = bind_at(CONTAINER_FOLDER)?;
    let command = bind_at(CONTAINER_BIN).map(|_| CONTAINER_BIN.to_string());
    Some(scoring::MailChannel {
        socket_folder: folder.source.clone(),
        socket: format!("{CONTAINER_FOLDER}/{SOCKET_NAME}"),
        read_only: !folder.rw,
        command,
        session: session_channel(container),
    })
}

/// The channel record of the last session of the container's workspace that ran in it.
fn session_channel(container: &ContainerInfo) -> Option<Value> {
    let id = Some(container.id.as_str()).filter(|id| !id.is_empty())?;
    let folder = container.labels.get(LOCAL_FOLDER_LABEL)?;
    let store = crate::handoff::state::StateStore::open_default().ok()?;
    let state = store.load(Path::new(folder)).ok()??;
    let session = state.sessions.iter().rev().find(|s| {
        s.container_id
            .as_deref()
            .is_some_and(|c| !c.is_empty() && (id.starts_with(c) || c.starts_with(id)))
            && s.mail.is_some()
    })?;
    let mut record = serde_json::to_value(session.mail.as_deref()?).ok()?;
    record["sessionId"] = Value::String(session.id.clone());
    Some(record)
}

/// One line for people about a container's mail channel.
pub fn mail_line(mail: &scoring::MailChannel) -> String {
    let mut line = format!(
        "mail channel: {} ({}) from {}",
        mail.socket,
        if mail.read_only {
            "read-only"
        } else {
            "WRITABLE"
        },
        mail.socket_folder
    );
    if let Some(s) = &mail.session {
        let n = |k: &str| s.get(k).and_then(Value::as_u64).unwrap_or(0);
        line.push_str(&format!(
            "; task `{}`, session {}: {} posted, {} delivered, {} refused, {} malformed",
            s.get("task").and_then(Value::as_str).unwrap_or("?"),
            s.get("sessionId").and_then(Value::as_str).unwrap_or("?"),
            n("posted"),
            n("delivered"),
            n("refused"),
            n("malformed")
        ));
    }
    line
}

/// The container's networks that are closed on this engine: internal with no gateway address
/// on the host ([`crate::ops::compose_network::is_closed`]; an `internal` network alone still
/// reaches the host on an engine without its own firewall rules, spec-note 0604).
///
/// Errors: [`OpsError::Engine`].
async fn closed_networks(engine: &dyn Engine, container: &ContainerInfo) -> Result<Vec<String>> {
    let mode = container.host.network_mode.as_str();
    if mode == "none" || mode == "host" || mode.starts_with("container:") {
        return Ok(Vec::new());
    }
    let mut closed = Vec::new();
    for name in &container.networks {
        if engine
            .inspect_network(name)
            .await?
            .is_some_and(|n| crate::ops::compose_network::is_closed(&n))
        {
            closed.push(name.clone());
        }
    }
    Ok(closed)
}

/// The git directories of the workspace folder `ws` (its repositories', found by
/// [`repository::inspect`]), when it is a folder on this host: what the audit context counts as
/// the workspace's git state ([`crate::ops::audit_context::context_for`]).
pub fn workspace_git_dirs(ws: &Path) -> Vec<PathBuf> {
    if ws.is_dir()
        && let Ok(w) = repository::inspect(ws, &InspectOptions::default())
    {
        return w.git_mounts.iter().map(|m| m.host_path.clone()).collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit names a container's mail channel from its binds (spec-note 0532), says
    /// whether the socket folder is read-only, and finds no channel where none is bound.
    #[test]
    fn the_audit_names_the_mail_channel_from_the_binds() {
        let bind = crate::engine::MountInfo::bind;
        let inspect = ContainerInfo {
            id: "abc".into(),
            mounts: vec![
                bind("/s/door/devcell-mail-1", "/usr/bin/devcell-mail", false),
                bind("/s/door/k/socket", "/.devcell-mail", false),
                bind("/w", "/workspace", true),
            ],
            ..ContainerInfo::default()
        };
        let mail = mail_channel(&inspect).unwrap();
        assert_eq!(mail.socket_folder, "/s/door/k/socket");
        assert_eq!(mail.socket, "/.devcell-mail/mail.sock");
        assert!(mail.read_only);
        assert_eq!(mail.command.as_deref(), Some("/usr/bin/devcell-mail"));
        assert_eq!(mail.session, None, "no workspace label: no session record");
        assert!(mail_line(&mail).contains("/.devcell-mail/mail.sock (read-only)"));

        let mut writable = inspect.clone();
        writable.mounts[1].rw = true;
        assert!(!mail_channel(&writable).unwrap().read_only);
        let mut none = inspect;
        none.mounts.remove(1);
        assert_eq!(mail_channel(&none), None);
    }
}
