//! A handoff's mail channel (issue 30; spec-notes 0531, 0532), for a clone task or a worktree
//! handoff alike: [`DoorRequest::prepare`] before the plan (the files the container binds, so
//! the plan lists them), [`DoorRequest::open`] once the session has begun (the channel's lock,
//! the task registered, its socket served), [`SessionDoor::close`] when the agent has ended
//! (the socket removed, the task ended in the mediator, the session's counts returned for its
//! record).
//!
//! One channel per task of a group at a time: `door/<key>/lock` (`flock(2)`) is held from
//! [`DoorRequest::open`] until the door is closed or dropped. A second handoff naming the same
//! task waits for it a bounded time (a `--replace`d session ends its channel as it stops),
//! then is refused: it never takes over another live session's socket or ends its
//! registration.

use crate::handoff::failure::IoFailed;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::channel::{CONTAINER_BIN, CONTAINER_FOLDER, SOCKET_NAME};
use super::{ContainerDoor, DoorError, DoorServer, Limits, MailDoor, SocketFolder, install_client};
use crate::mail::{Bounds, Escalation, GroupName, Mediator, Policy, TaskName};
use crate::settings::MailSettings;

/// How long [`DoorRequest::open`] waits for another handoff of the same task to let go of
/// its channel (a replaced session stops within its grace and stop deadline).
pub const OPEN_WAIT: Duration = Duration::from_secs(40);

/// What a handoff's channel will be, decided before its plan: the group, the task, and the
/// container's read-only binds. Nothing is served yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorRequest {
    /// The group whose mediator the task joins.
    pub group: GroupName,
    /// The task's name in the group (the sender of everything its sandbox sends).
    pub task: TaskName,
    /// The task's branch, stamped on what it sends.
    pub branch: Option<String>,
    /// The container's binds.
    pub container: ContainerDoor,
    state_root: PathBuf,
    folder: SocketFolder,
    /// The task's own folder (a clone task's folder, a worktree handoff's workspace): two
    /// different tasks that have one name in the group never run a channel at once.
    owner: Option<PathBuf>,
}

/// The channel as a session's record and `status` name it (spec-note 0532): where its socket
/// is, which task and group it serves, and what went through it during the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelRecord {
    /// The group (its mediator and log: `<state>/mail/<group>/`).
    pub group: String,
    /// The task the sandbox sends as.
    pub task: String,
    /// The command in the container.
    pub command: String,
    /// The socket's path in the container.
    pub socket: String,
    /// The socket's path on the host (removed when the session ends).
    pub host_socket: PathBuf,
    /// Messages the task posted and the mediator accepted (sends and replies; a retried
    /// send with the same client id is not counted twice).
    pub posted: u64,
    /// Distinct messages handed to the task (listed by `inbox` or shown by `read`).
    pub delivered: u64,
    /// Commands the mediator refused (each with its error to the sandbox).
    pub refused: u64,
    /// Connections refused before any command ran (bad frames, oversize, not UTF-8,
    /// another protocol): counted, logged in the group's log, closed.
    pub malformed: u64,
}

impl DoorRequest {
    /// Installs `devcell-mail` and makes the task's socket folder under `state_root`.
    ///
    /// Errors: [`DoorError::Io`].
    pub fn prepare(
        state_root: &Path,
        group: GroupName,
        task: TaskName,
        branch: Option<String>,
    ) -> Result<DoorRequest, DoorError> {
        let client = install_client(state_root)?;
        let folder = SocketFolder::create(state_root, group.as_str(), task.as_str())?;
        Ok(Self::of_folder(
            state_root,
            (group, task, branch),
            &client,
            folder,
        ))
    }

    /// The request [`DoorRequest::prepare`] would make, with nothing installed or made: what
    /// `handoff --plan` lists (the same binds a real run adds).
    pub fn planned(
        state_root: &Path,
        group: GroupName,
        task: TaskName,
        branch: Option<String>,
    ) -> DoorRequest {
        let folder = SocketFolder::planned(state_root, group.as_str(), task.as_str());
        let client = super::channel::client_path(state_root);
        Self::of_folder(state_root, (group, task, branch), &client, folder)
    }

    /// The request of `(group, task, branch)` whose sockets are in `folder` and whose client
    /// is `client` on the host (made or planned alike), owned by no task folder yet.
    fn of_folder(
        state_root: &Path,
        (group, task, branch): (GroupName, TaskName, Option<String>),
        client: &Path,
        folder: SocketFolder,
    ) -> DoorRequest {
        DoorRequest {
            container: ContainerDoor::new(client, &folder),
            group,
            task,
            branch,
            state_root: state_root.to_path_buf(),
            folder,
            owner: None,
        }
    }

    /// This request, made for the task whose own folder is `folder` (spec-note 0532): while
    /// it runs, a different task of the same name in the group (a multi-repository task and a
    /// single-repository task `T` of its first repository, a worktree named like a clone
    /// task) is refused at once with [`DoorError::NameTaken`], instead of sharing its inbox.
    pub fn owned_by(mut self, folder: &Path) -> DoorRequest {
        self.owner = Some(std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf()));
        self
    }

    /// The record of this channel with no traffic yet.
    pub fn record(&self) -> ChannelRecord {
        ChannelRecord {
            group: self.group.as_str().to_string(),
            task: self.task.as_str().to_string(),
            command: CONTAINER_BIN.to_string(),
            socket: format!("{CONTAINER_FOLDER}/{SOCKET_NAME}"),
            host_socket: self.folder.socket(),
            ..ChannelRecord::default()
        }
    }

    /// Takes the channel's lock (waiting at most `wait` for another handoff of the task),
    /// opens the group's mediator with `settings`, registers the task and serves its socket.
    ///
    /// Errors: [`DoorError::Busy`] when another handoff keeps the task's channel;
    /// [`DoorError::Mail`] (the policy refused, the log unreadable); [`DoorError::Io`].
    pub fn open(&self, settings: &MailSettings, wait: Duration) -> Result<SessionDoor, DoorError> {
        let lock = self.lock(wait)?;
        let mediator = Arc::new(
            Mediator::open(
                &self.state_root,
                &self.group,
                Policy::from_settings(settings)?,
                Bounds::from_settings(settings),
            )?
            .with_escalation(Escalation::from_settings(settings)?),
        );
        mediator.register(&self.task, self.branch.as_deref())?;
        let handler = Arc::new(MailDoor::new(
            Arc::clone(&mediator),
            settings.max_message_bytes,
        ));
        let server = match DoorServer::start(
            &self.folder,
            self.task.as_str(),
            handler.clone(),
            Limits::default(),
        ) {
            Ok(s) => s,
            Err(e) => {
                let _ = mediator.end(&self.task);
                return Err(e);
            }
        };
        let recovery = spawn_unrun_escalations(&mediator);
        Ok(SessionDoor {
            server: Some(server),
            recovery,
            mediator,
            handler,
            task: self.task.clone(),
            record: self.record(),
            _lock: lock,
        })
    }

    /// `door/<key>/lock`, held exclusively; polled until `wait` has passed.
    fn lock(&self, wait: Duration) -> Result<File, DoorError> {
        use rustix::fs::{FlockOperation, flock};
        let path = self
            .folder
            .path()
            .parent()
            .unwrap_or(self.folder.path())
            .join("lock");
        let io = |source| {
            DoorError::Io(IoFailed {
                path: path.clone(),
                source,
            })
        };
        let file = crate::ops::state_folder::open_lock_file_nofollow(&path).map_err(io)?;
        let until = Instant::now() + wait;
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {
                    write_owner(&file, self.owner.as_deref()).map_err(io)?;
                    return Ok(file);
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    let task = self.task.as_str().to_string();
                    if let Some(other) = self.held_by_another(&path) {
                        // another task of this name: it will not let go for this one
                        return Err(DoorError::NameTaken { task, other });
                    }
                    if Instant::now() >= until {
                        return Err(DoorError::Busy { task });
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(io(e.into())),
            }
        }
    }
}

impl DoorRequest {
    /// The folder of the other task holding the channel's lock at `lock`, when it is not this
    /// request's own (both known).
    fn held_by_another(&self, lock: &Path) -> Option<PathBuf> {
        let mine = self.owner.as_deref()?;
        let text = crate::config::bounded::read_to_string(lock, 8192).ok()?;
        let theirs = PathBuf::from(text.trim_end_matches('\n'));
        (!theirs.as_os_str().is_empty() && theirs != mine).then_some(theirs)
    }
}

/// Records in the held lock file which task's folder holds it (empty when unknown).
fn write_owner(file: &File, owner: Option<&Path>) -> std::io::Result<()> {
    use std::io::Write as _;
    file.set_len(0)?;
    let mut f = file;
    if let Some(owner) = owner {
        f.write_all(format!("{}\n", owner.to_string_lossy()).as_bytes())?;
    }
    Ok(())
}

/// Runs, beside the session, the escalation commands a devcell killed between holding a
/// message and running its command left unrun (spec-note 0533): the door's start is the
/// first time devcell opens the group's log with the user's command again. Beside, not
/// before: the handoff does not wait for the user's commands (each bounded by its deadline).
fn spawn_unrun_escalations(mediator: &Arc<Mediator>) -> Option<std::thread::JoinHandle<()>> {
    let mediator = Arc::clone(mediator);
    std::thread::Builder::new()
        .name("mail-escalations".into())
        .spawn(move || {
            let _ = mediator.run_unrun_escalations();
        })
        .ok()
}

/// A task's open channel for one session; closed by [`SessionDoor::close`] or on drop.
#[derive(Debug)]
pub struct SessionDoor {
    server: Option<DoorServer>,
    /// The run of escalation commands a killed devcell left unrun (joined at close).
    recovery: Option<std::thread::JoinHandle<()>>,
    mediator: Arc<Mediator>,
    handler: Arc<MailDoor>,
    task: TaskName,
    record: ChannelRecord,
    _lock: File,
}

impl SessionDoor {
    /// The channel's record with what went through it so far.
    pub fn record(&self) -> ChannelRecord {
        let counts = self.handler.counts();
        ChannelRecord {
            posted: counts.posted,
            delivered: counts.delivered,
            refused: counts.refused,
            malformed: counts.malformed,
            ..self.record.clone()
        }
    }

    /// Stops serving (the socket is removed) and ends the task in the mediator (messages to
    /// it are refused until its next handoff registers it again); returns the session's
    /// record of the channel.
    ///
    /// Errors: [`DoorError::Mail`] when the end could not be logged.
    pub fn close(mut self) -> Result<ChannelRecord, DoorError> {
        if let Some(server) = self.server.take() {
            server.stop();
        }
        if let Some(recovery) = self.recovery.take() {
            let _ = recovery.join();
        }
        self.mediator.end(&self.task)?;
        Ok(self.record())
    }
}

impl Drop for SessionDoor {
    /// A handoff that failed after its channel opened still ends it (best effort).
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
            let _ = self.mediator.end(&self.task);
        }
    }
}
