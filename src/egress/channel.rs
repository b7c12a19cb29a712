//! The channel out of an `allowlist` container (issue 13, item 1; spec-note 0500): the
//! container runs with network `none` (loopback only: no route, no resolver), and its only way
//! out is a Unix socket in a per-workspace host folder, bind-mounted read-only into the
//! container and served by the host-side [`Proxy`](super::Proxy). Inside, devcell's static
//! forwarder (built by `build.rs` from `forwarder_main.rs`, bind-mounted read-only, run as the
//! container's user, no capability) listens on `127.0.0.1:<port>` and relays each connection
//! to the socket; the proxy environment variables point the container's tools at it.
//!
//! Host layout, under devcell's state folder:
//! - `egress/forwarder-<sha256 prefix>`: the forwarder executable (mode 0555), shared;
//! - `egress/<key>/socket/proxy.sock`: one workspace's proxy socket (folder 0711, socket 0666:
//!   the container's user, whatever its uid, must connect; `egress/` and `egress/<key>/` are
//!   0700, so no other host user reaches it).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use sha2::{Digest, Sha256};

use crate::engine::{ContainerSpec, Mount, MountKind};

use super::error::EgressError;

/// The forwarder executable, static, for this build's target.
pub static FORWARDER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/devcell-egress-forwarder"));

/// Where the forwarder is mounted in the container.
pub const CONTAINER_FORWARDER: &str = "/.devcell-egress/forwarder";
/// Where the socket folder is mounted in the container.
pub const CONTAINER_SOCKET_FOLDER: &str = "/.devcell-egress/socket";
/// The socket's file name in its folder.
pub const SOCKET_NAME: &str = "proxy.sock";
/// The loopback port the forwarder listens on unless the operation picks another.
pub const DEFAULT_LISTEN_PORT: u16 = 3128;
/// The longest Unix socket path the kernel accepts (`sun_path`, without its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Writes the forwarder into `state/egress/` once per content (named by its hash, so two
/// devcell versions never overwrite each other's) and returns its host path.
pub fn install_forwarder(state: &Path) -> Result<PathBuf, EgressError> {
    let dir = state.join("egress");
    std::fs::create_dir_all(&dir).map_err(EgressError::io(&dir))?;
    install_executable(&dir, "forwarder", FORWARDER).map_err(|(path, e)| EgressError::io(&path)(e))
}

/// Installs `bytes` (a static executable devcell embeds: the forwarder, `devcell-mail`) as
/// `dir/<prefix>-<sha256 prefix>`, mode 0555, once per content: a file already there with
/// these bytes is kept; else a new file is written beside it and renamed into place (never
/// written through what is there).
///
/// Errors: the path that failed and its I/O error.
pub fn install_executable(
    dir: &Path,
    prefix: &str,
    bytes: &[u8],
) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    let digest = hex::encode(Sha256::digest(bytes));
    let path = dir.join(format!("{prefix}-{}", &digest[..16]));
    if std::fs::read(&path).is_ok_and(|b| b == bytes) {
        return Ok(path);
    }
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| (dir.to_path_buf(), e))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(|e| (tmp.path().to_path_buf(), e))?;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o555))
        .map_err(|e| (tmp.path().to_path_buf(), e))?;
    tmp.persist(&path).map_err(|e| (path.clone(), e.error))?;
    Ok(path)
}

/// One workspace's socket folder on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketFolder {
    folder: PathBuf,
}

impl SocketFolder {
    /// Creates `state/egress/<key>/socket/` (mode 0711). `key` names the workspace (e.g. its
    /// dev container id), so concurrent workspaces each get their own socket.
    pub fn create(state: &Path, key: &str) -> Result<SocketFolder, EgressError> {
        let folder = state.join("egress").join(key).join("socket");
        std::fs::create_dir_all(&folder).map_err(EgressError::io(&folder))?;
        // The socket must be 0666 for the container's user, so the folders above it are the
        // host's only guard: private to devcell's user whatever the state folder's own mode
        // (a `DEVCELL_STATE_DIR` made 0755), so no other host user reaches the proxy and the
        // upstreams' credentials it adds. The container reaches the socket through its own
        // bind of `socket/`, not through these folders.
        for private in [state.join("egress"), state.join("egress").join(key)] {
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))
                .map_err(EgressError::io(&private))?;
        }
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o711))
            .map_err(EgressError::io(&folder))?;
        let socket = folder.join(SOCKET_NAME);
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(EgressError::Io {
                path: socket,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "longer than a Unix socket path may be (107 bytes); use a shorter state folder",
                ),
            });
        }
        Ok(SocketFolder { folder })
    }

    /// The folder (bind-mounted into the container).
    pub fn path(&self) -> &Path {
        &self.folder
    }

    /// The socket's host path.
    pub fn socket(&self) -> PathBuf {
        self.folder.join(SOCKET_NAME)
    }

    /// Binds the socket (replacing a stale one left by a stopped proxy) with mode 0666. Needs
    /// a tokio runtime.
    pub fn bind(&self) -> Result<tokio::net::UnixListener, EgressError> {
        let socket = self.socket();
        match std::fs::remove_file(&socket) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(EgressError::io(&socket)(e)),
        }
        let listener = tokio::net::UnixListener::bind(&socket).map_err(EgressError::io(&socket))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
            .map_err(EgressError::io(&socket))?;
        Ok(listener)
    }
}

/// What an `allowlist` container needs, for the operations to add to its [`ContainerSpec`]
/// and to start after it: network `none`, two read-only binds, the proxy environment, and the
/// forwarder's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEgress {
    /// Always `none`: loopback only.
    pub network_mode: String,
    /// The forwarder (read-only) and the socket folder (read-only: connecting needs no write).
    pub mounts: Vec<Mount>,
    /// `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` (both cases) → `http://127.0.0.1:<port>`;
    /// `NO_PROXY` (both cases) → the container's own loopback.
    pub env: IndexMap<String, String>,
    /// The forwarder's argv, to run in the container as its user (detached; it prints
    /// `listening 127.0.0.1:<port>` once ready), or with `--` and a command appended to wrap it.
    pub forwarder_command: Vec<String>,
}

impl ContainerEgress {
    /// The container side of `folder`'s channel, with the forwarder installed at `forwarder`
    /// (from [`install_forwarder`]) listening on `127.0.0.1:<port>`.
    pub fn new(forwarder: &Path, folder: &SocketFolder, port: u16) -> ContainerEgress {
        let bind = |source: &Path, target: &str| Mount {
            kind: MountKind::Bind,
            source: Some(source.to_string_lossy().into_owned()),
            target: target.to_string(),
            read_only: true,
        };
        let proxy = format!("http://127.0.0.1:{port}");
        let mut env = IndexMap::new();
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            env.insert(name.to_string(), proxy.clone());
            env.insert(name.to_ascii_lowercase(), proxy.clone());
        }
        for name in ["NO_PROXY", "no_proxy"] {
            env.insert(name.to_string(), "localhost,127.0.0.1,::1".to_string());
        }
        ContainerEgress {
            network_mode: "none".to_string(),
            mounts: vec![
                bind(forwarder, CONTAINER_FORWARDER),
                bind(folder.path(), CONTAINER_SOCKET_FOLDER),
            ],
            env,
            forwarder_command: vec![
                CONTAINER_FORWARDER.to_string(),
                format!("127.0.0.1:{port}"),
                format!("{CONTAINER_SOCKET_FOLDER}/{SOCKET_NAME}"),
            ],
        }
    }

    /// The forwarder's argv to start it in the background (`--background`): the exec returns
    /// once the port is bound (`listening …`), or at once when a forwarder already serves it
    /// (`in-use …`), and the forwarder keeps serving as the container's user.
    pub fn background_command(&self) -> Vec<String> {
        let mut argv = self.forwarder_command.clone();
        argv.push("--background".to_string());
        argv
    }

    /// Adds the channel to `spec`: network `none`, the mounts, the environment (replacing
    /// any value the configuration set for those names).
    pub fn apply(&self, spec: &mut ContainerSpec) {
        spec.network_mode = Some(self.network_mode.clone());
        spec.mounts.extend(self.mounts.iter().cloned());
        for (k, v) in &self.env {
            spec.env.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn the_forwarder_is_a_static_executable() {
        assert_eq!(&FORWARDER[..5], b"\x7fELF\x02", "a 64-bit ELF executable");
        // No PT_INTERP program header: it needs no loader from the image. (ELF64 header:
        // e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38; p_type first in each entry.)
        let u16_at = |o: usize| u16::from_le_bytes([FORWARDER[o], FORWARDER[o + 1]]) as usize;
        let phoff = u64::from_le_bytes(FORWARDER[0x20..0x28].try_into().unwrap()) as usize;
        let (size, count) = (u16_at(0x36), u16_at(0x38));
        assert!(count > 0);
        for i in 0..count {
            let at = phoff + i * size;
            let p_type = u32::from_le_bytes(FORWARDER[at..at + 4].try_into().unwrap());
            assert_ne!(
                p_type, 3,
                "the forwarder has a PT_INTERP (dynamic loader) header"
            );
        }
    }

    #[test]
    fn the_forwarder_is_installed_once_per_content_read_only() {
        let state = tempfile::tempdir().unwrap();
        let a = install_forwarder(state.path()).unwrap();
        let b = install_forwarder(state.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(std::fs::read(&a).unwrap(), FORWARDER);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o555);
    }

    /// Attack (spec-note 0500): the socket is 0666, so a state folder others may enter
    /// (`DEVCELL_STATE_DIR` made 0755) would give every host user the proxy and the upstream
    /// credentials it adds. The folders above the socket are private whatever the state
    /// folder's mode; as root, another uid is shown not to reach the socket.
    #[tokio::test]
    async fn no_other_host_user_reaches_the_socket() {
        let state = tempfile::tempdir().unwrap();
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // an `egress/` another devcell made with the default umask
        std::fs::create_dir(state.path().join("egress")).unwrap();
        std::fs::set_permissions(
            state.path().join("egress"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let folder = SocketFolder::create(state.path(), "ws1").unwrap();
        let _listener = folder.bind().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state.path().join("egress")), 0o700);
        assert_eq!(mode(&state.path().join("egress/ws1")), 0o700);
        assert_eq!(mode(folder.path()), 0o711);
        assert_eq!(mode(&folder.socket()), 0o666);
        if rustix::process::geteuid().is_root() {
            use std::os::unix::process::CommandExt as _;
            let reaches = |uid: u32| {
                std::process::Command::new("sh")
                    .arg("-c")
                    .arg("test -S \"$0\"")
                    .arg(folder.socket())
                    .uid(uid)
                    .gid(uid)
                    .status()
                    .unwrap()
                    .success()
            };
            assert!(reaches(0), "the check itself must see the socket");
            assert!(
                !reaches(65534),
                "another host user reaches the proxy socket"
            );
        }
    }

    #[test]
    fn the_container_gets_network_none_read_only_binds_and_proxy_env() {
        let state = tempfile::tempdir().unwrap();
        let fwd = install_forwarder(state.path()).unwrap();
        let folder = SocketFolder::create(state.path(), "ws1").unwrap();
        let c = ContainerEgress::new(&fwd, &folder, 3128);
        let mut spec = ContainerSpec {
            network_mode: Some("bridge".into()),
            ..Default::default()
        };
        spec.env
            .insert("HTTP_PROXY".into(), "http://evil.test:1".into());
        c.apply(&mut spec);
        assert_eq!(spec.network_mode.as_deref(), Some("none"));
        assert_eq!(spec.env["HTTP_PROXY"], "http://127.0.0.1:3128");
        assert_eq!(spec.env["https_proxy"], "http://127.0.0.1:3128");
        assert_eq!(spec.env["ALL_PROXY"], "http://127.0.0.1:3128");
        assert_eq!(spec.env["NO_PROXY"], "localhost,127.0.0.1,::1");
        assert!(
            spec.mounts
                .iter()
                .all(|m| m.read_only && m.kind == MountKind::Bind)
        );
        assert_eq!(spec.mounts[1].source.as_deref(), folder.path().to_str());
        assert_eq!(
            c.forwarder_command,
            [
                CONTAINER_FORWARDER,
                "127.0.0.1:3128",
                "/.devcell-egress/socket/proxy.sock"
            ]
        );
        let mode = std::fs::metadata(folder.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o711);
    }

    #[test]
    fn a_socket_path_too_long_for_the_kernel_is_an_error() {
        let state = tempfile::tempdir().unwrap();
        let deep = state.path().join("x".repeat(90));
        let err = SocketFolder::create(&deep, "ws").unwrap_err().to_string();
        assert!(err.contains("Unix socket path"), "{err}");
    }

    /// The forwarder, run on the host (it is static), relays a TCP connection to the socket
    /// and back, and with `--` runs a command once its port is bound.
    #[tokio::test]
    async fn the_forwarder_relays_loopback_tcp_to_the_socket() {
        let state = tempfile::tempdir().unwrap();
        let fwd = install_forwarder(state.path()).unwrap();
        let folder = SocketFolder::create(state.path(), "ws").unwrap();
        let listener = folder.bind().unwrap();
        let mode = std::fs::metadata(folder.socket())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o666);
        let echo = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(b"echo:").await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let listen = format!("127.0.0.1:{port}");
        let socket = folder.socket();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(&fwd)
                .arg(&listen)
                .arg(&socket)
                .args(["--", "sh", "-c", "exit 7"])
                .status()
                .unwrap()
        })
        .await
        .unwrap();
        assert_eq!(
            out.code(),
            Some(7),
            "the wrapped command's status is the forwarder's"
        );

        let fwd = install_forwarder(state.path()).unwrap();
        let mut child = std::process::Command::new(&fwd)
            .arg(format!("127.0.0.1:{port}"))
            .arg(folder.socket())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reply = tokio::task::spawn_blocking(move || {
            let mut line = [0u8; 64];
            let n = stdout.read(&mut line).unwrap();
            assert!(String::from_utf8_lossy(&line[..n]).starts_with("listening 127.0.0.1:"));
            let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            tcp.write_all(b"hello").unwrap();
            let mut reply = String::new();
            tcp.read_to_string(&mut reply).unwrap();
            reply
        })
        .await
        .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        echo.await.unwrap();
        assert_eq!(reply, "echo:hello");
    }
}
