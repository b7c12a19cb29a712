//! The door's host side files and what the container gets (issue 30; spec-note 0531): the
//! `devcell-mail` executable, installed once per content and bind-mounted read-only at
//! [`CONTAINER_BIN`] (`/usr/bin`: on the `PATH` of every common image, busybox, Debian, Alpine,
//! even one whose `PATH` leaves out `/usr/local/bin`), and one
//! socket folder per task, bind-mounted read-only at [`CONTAINER_FOLDER`], so a sandbox reaches
//! its own socket and no other.
//!
//! Host layout, under devcell's state folder:
//! - `door/devcell-mail-<sha256 prefix>`: the executable (mode 0555), shared;
//! - `door/<key>/socket/mail.sock`: one task's socket (folder 0711, socket 0666: the
//!   container's user, whatever its uid, must connect; `door/` and `door/<key>/` are 0700, so
//!   no other host user reaches it). `<key>` is a hash of the group and the task, short enough
//!   for a Unix socket path.

use crate::handoff::failure::IoFailed;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::DoorError;

/// The `devcell-mail` executable, static, for this build's target.
pub static CLIENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/devcell-mail"));

/// Where `devcell-mail` is mounted in the container (a folder on every image's `PATH`).
pub const CONTAINER_BIN: &str = "/usr/bin/devcell-mail";
/// Where the task's socket folder is mounted in the container.
pub const CONTAINER_FOLDER: &str = "/.devcell-mail";
/// The socket's file name in its folder.
pub const SOCKET_NAME: &str = "mail.sock";
/// The longest Unix socket path the kernel accepts (`sun_path`, without its NUL).
const MAX_SOCKET_PATH: usize = 107;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DoorError + '_ {
    move |source| {
        DoorError::Io(IoFailed {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Writes `devcell-mail` into `state/door/` once per content (named by its hash, so two
/// devcell versions never overwrite each other's) and returns its host path.
///
/// Errors: [`DoorError::Io`].
pub fn install_client(state: &Path) -> Result<PathBuf, DoorError> {
    let dir = state.join("door");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io(&dir))?;
    crate::egress::channel::install_executable(&dir, "devcell-mail", CLIENT)
        .map_err(|(path, e)| io(&path)(e))
}

/// Where [`install_client`] puts `devcell-mail` under `state`, without installing it (for
/// `handoff --plan`).
pub fn client_path(state: &Path) -> PathBuf {
    let digest = hex::encode(Sha256::digest(CLIENT));
    state
        .join("door")
        .join(format!("devcell-mail-{}", &digest[..16]))
}

/// One task's socket folder on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketFolder {
    folder: PathBuf,
}

impl SocketFolder {
    /// Creates `state/door/<key>/socket/` (mode 0711) for task `task` of group `group`; the
    /// same task gets the same folder in every session (its container's bind stays valid).
    ///
    /// Errors: [`DoorError::Io`], also when the socket's path would be too long.
    pub fn create(state: &Path, group: &str, task: &str) -> Result<SocketFolder, DoorError> {
        let key = &key_of(group, task);
        let door = state.join("door");
        let folder = door.join(key).join("socket");
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        // The socket must be 0666 for the container's user, so the folders above it are the
        // host's only guard, whatever the state folder's own mode.
        for private in [door.clone(), door.join(key)] {
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))
                .map_err(io(&private))?;
        }
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o711))
            .map_err(io(&folder))?;
        let socket = folder.join(SOCKET_NAME);
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(DoorError::Io(IoFailed {
                path: socket,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "longer than a Unix socket path may be (107 bytes); use a shorter state folder",
                ),
            }));
        }
        Ok(SocketFolder { folder })
    }

    /// Where [`SocketFolder::create`] makes the folder, without making it (for `handoff
    /// --plan`).
    pub fn planned(state: &Path, group: &str, task: &str) -> SocketFolder {
        SocketFolder {
            folder: state.join("door").join(key_of(group, task)).join("socket"),
        }
    }

    /// The folder (bind-mounted into the container).
    pub fn path(&self) -> &Path {
        &self.folder
    }

    /// The socket's host path.
    pub fn socket(&self) -> PathBuf {
        self.folder.join(SOCKET_NAME)
    }
}

/// The `door/<key>` folder name of task `task` of group `group`: a hash short enough for a
/// Unix socket path.
fn key_of(group: &str, task: &str) -> String {
    let digest = hex::encode(Sha256::digest(format!("{group}\n{task}").as_bytes()));
    digest[..16].to_string()
}

/// Removes the `door/<key>` folder of task `task` of group `group` (its socket folder and
/// lock) once the task is deleted, unless a channel of that name is open now (its lock is
/// held: a worktree handoff or another task of the same name); returns whether it was
/// removed. The same name made again later gets a new one.
///
/// Errors: [`DoorError::Io`] when the folder exists but cannot be removed.
pub fn remove_socket_folder(state: &Path, group: &str, task: &str) -> Result<bool, DoorError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let folder = state.join("door").join(key_of(group, task));
    if folder.symlink_metadata().is_err() {
        return Ok(false);
    }
    let lock_path = folder.join("lock");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&lock_path);
    // held while the folder goes: no channel opens on it meanwhile
    let _held = match lock {
        // (a lock just let go can still read as held for a moment: LOCK_GRACE)
        Ok(file) => match crate::ops::state_folder::lock_within_grace(&file) {
            Ok(true) => Some(file),
            Ok(false) => return Ok(false),
            Err(e) => return Err(io(&lock_path)(e.into())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(&lock_path)(e)),
    };
    std::fs::remove_dir_all(&folder).map_err(io(&folder))?;
    Ok(true)
}

/// What a task's container gets: two read-only binds, as `--mount` strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerDoor {
    /// `(host source, container target)` of each bind, all read-only: the executable and the
    /// socket folder (connecting needs no write).
    pub binds: Vec<(PathBuf, String)>,
}

impl ContainerDoor {
    /// The container side of `folder`'s channel with `devcell-mail` installed at `client`
    /// (from [`install_client`]).
    pub fn new(client: &Path, folder: &SocketFolder) -> ContainerDoor {
        ContainerDoor {
            binds: vec![
                (client.to_path_buf(), CONTAINER_BIN.to_string()),
                (folder.path().to_path_buf(), CONTAINER_FOLDER.to_string()),
            ],
        }
    }

    /// The binds as read-only bind mounts, typed to the engine call.
    pub fn mounts(&self) -> Vec<crate::engine::Mount> {
        self.binds
            .iter()
            .map(|(source, target)| crate::engine::Mount {
                kind: crate::engine::MountKind::Bind,
                source: Some(source.to_string_lossy().into_owned()),
                target: target.clone(),
                read_only: true,
            })
            .collect()
    }

    /// The binds as `--mount` strings (`type=bind,source=…,target=…,readonly`; a field with a
    /// comma or a quote is quoted CSV-style, as Docker's parser expects).
    pub fn mount_strings(&self) -> Vec<String> {
        let field = |key: &str, value: &str| {
            let kv = format!("{key}={value}");
            if kv.contains(',') || kv.contains('"') {
                format!("\"{}\"", kv.replace('"', "\"\""))
            } else {
                kv
            }
        };
        self.binds
            .iter()
            .map(|(source, target)| {
                format!(
                    "type=bind,{},{},readonly",
                    field("source", &source.to_string_lossy()),
                    field("target", target)
                )
            })
            .collect()
    }
}

/// The context file's `sandbox.mail` text for the agent.
pub fn agent_text() -> String {
    "Other tasks work on this repository in their own sandboxes. You can reach them only \
     through devcell's mediator, with the `devcell-mail` command (`devcell-mail --help`): \
     `devcell-mail send --to TASK[,TASK] --subject S [--type notice|request|reply|contract-change|handoff] \
     [--ack-required] [--body TEXT | body on stdin]`, `devcell-mail inbox`, `devcell-mail read ID`, \
     `devcell-mail ack ID`, `devcell-mail reply ID`, `devcell-mail sent`. You are always the sender; \
     the user's policy may hold a message for the user; check `inbox` from time to time and \
     acknowledge what asks for it."
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_a_static_executable() {
        assert_eq!(&CLIENT[..5], b"\x7fELF\x02", "a 64-bit ELF executable");
        let u16_at = |o: usize| u16::from_le_bytes([CLIENT[o], CLIENT[o + 1]]) as usize;
        let phoff = u64::from_le_bytes(CLIENT[0x20..0x28].try_into().unwrap()) as usize;
        let (size, count) = (u16_at(0x36), u16_at(0x38));
        assert!(count > 0);
        for i in 0..count {
            let at = phoff + i * size;
            let p_type = u32::from_le_bytes(CLIENT[at..at + 4].try_into().unwrap());
            assert_ne!(
                p_type, 3,
                "devcell-mail has a PT_INTERP (dynamic loader) header"
            );
        }
    }

    #[test]
    fn the_client_is_installed_once_per_content_read_only() {
        let state = tempfile::tempdir().unwrap();
        let a = install_client(state.path()).unwrap();
        let b = install_client(state.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(std::fs::read(&a).unwrap(), CLIENT);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o555);
    }

    /// Each task has its own folder (a sandbox binds only its own), the same in every
    /// session; the folders above the socket are private to devcell's user.
    #[test]
    fn each_task_has_its_own_private_socket_folder() {
        let state = tempfile::tempdir().unwrap();
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let a = SocketFolder::create(state.path(), "g", "a").unwrap();
        let b = SocketFolder::create(state.path(), "g", "b").unwrap();
        let other_group = SocketFolder::create(state.path(), "h", "a").unwrap();
        assert_ne!(a, b);
        assert_ne!(a, other_group);
        assert_eq!(a, SocketFolder::create(state.path(), "g", "a").unwrap());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state.path().join("door")), 0o700);
        assert_eq!(mode(a.path().parent().unwrap()), 0o700);
        assert_eq!(mode(a.path()), 0o711);
        let client = install_client(state.path()).unwrap();
        let door = ContainerDoor::new(&client, &a);
        let mounts = door.mount_strings();
        assert_eq!(mounts.len(), 2);
        assert!(
            mounts.iter().all(|m| m.ends_with(",readonly")),
            "{mounts:?}"
        );
        assert!(mounts[0].contains("target=/usr/bin/devcell-mail"));
        assert!(mounts[1].contains(&format!("source={}", a.path().display())));
        assert!(mounts[1].contains("target=/.devcell-mail"));
        // the typed mounts the engine gets are the ones the text names
        let parsed: Vec<_> = mounts
            .iter()
            .map(|m| crate::engine::run_args::parse_mount(m).unwrap())
            .collect();
        assert_eq!(door.mounts(), parsed);
    }

    #[test]
    fn a_socket_path_too_long_for_the_kernel_is_an_error() {
        let state = tempfile::tempdir().unwrap();
        let deep = state.path().join("x".repeat(90));
        let err = SocketFolder::create(&deep, "g", "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("Unix socket path"), "{err}");
    }
}
