//! The in-container end of a `ports` forward: a relay program the image already has, run
//! through the engine's exec API with its stdin and stdout attached, that connects to
//! `127.0.0.1:PORT` inside the container. Nothing is published and the container's network is
//! not touched: the bytes travel over the engine's own connection (spec-note 0651).

use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

use crate::engine::{Engine, ExecInput, ExecOutput, ExecRequest};
use crate::ops::error::{OpsError, Result};

/// A program that copies its stdin to a TCP connection to `127.0.0.1:PORT` and that
/// connection to its stdout, in the order [`Relay::probe`] prefers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// `socat - TCP:127.0.0.1:PORT`.
    Socat,
    /// `nc 127.0.0.1 PORT` (any netcat: OpenBSD's, the traditional one, busybox's applet link).
    Nc,
    /// `busybox nc 127.0.0.1 PORT` (busybox with the `nc` applet but no `nc` link).
    BusyboxNc,
    /// `python3` with a short socket-copying script.
    Python3,
    /// `bash` with its `/dev/tcp` redirection, and `cat`.
    Bash,
}

/// The probe's shell script: prints the name of each relay found, one per line, in
/// [`Relay`]'s order (`command -v`, `read` and `[` are shell built-ins: nothing else is needed).
const PROBE: &str = r#"for p in socat nc; do command -v "$p" >/dev/null 2>&1 && echo "$p"; done
busybox --list 2>/dev/null | while read -r a; do [ "$a" = nc ] && echo busybox-nc; done
command -v python3 >/dev/null 2>&1 && echo python3
command -v bash >/dev/null 2>&1 && command -v cat >/dev/null 2>&1 && echo bash
exit 0"#;

/// The Python relay: one thread copies stdin to the socket (then half-closes it), the main
/// thread copies the socket to stdout until the server closes.
const PYTHON: &str = "import os,socket,sys,threading
s=socket.create_connection(('127.0.0.1',int(sys.argv[1])))
def up():
    while True:
        b=os.read(0,65536)
        if not b:
            break
        s.sendall(b)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up,daemon=True).start()
while True:
    b=s.recv(65536)
    if not b:
        break
    sys.stdout.buffer.write(b)
    sys.stdout.buffer.flush()";

/// The bash relay: the writer `cat` in the background (its stdin given explicitly: a
/// background job's is `/dev/null` otherwise), the reader `cat` as the exec's own process, so
/// the exec ends when the server closes the connection.
const BASH: &str =
    r#"exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; cat <&0 >&3 2>/dev/null & exec cat <&3"#;

impl Relay {
    /// The relay's name as the probe prints it.
    pub fn name(self) -> &'static str {
        match self {
            Relay::Socat => "socat",
            Relay::Nc => "nc",
            Relay::BusyboxNc => "busybox-nc",
            Relay::Python3 => "python3",
            Relay::Bash => "bash",
        }
    }

    /// The first relay the probe's `output` names; `None` when it names none.
    pub fn from_probe(output: &str) -> Option<Relay> {
        let found: Vec<&str> = output.lines().map(str::trim).collect();
        [
            Relay::Socat,
            Relay::Nc,
            Relay::BusyboxNc,
            Relay::Python3,
            Relay::Bash,
        ]
        .into_iter()
        .find(|r| found.contains(&r.name()))
    }

    /// The relay's argv for `port` (run without a shell, except the bash relay's own).
    pub fn argv(self, port: u16) -> Vec<String> {
        let port = port.to_string();
        let argv: Vec<&str> = match self {
            Relay::Socat => {
                return vec!["socat".into(), "-".into(), format!("TCP:127.0.0.1:{port}")];
            }
            Relay::Nc => vec!["nc", "127.0.0.1", &port],
            Relay::BusyboxNc => vec!["busybox", "nc", "127.0.0.1", &port],
            Relay::Python3 => vec!["python3", "-c", PYTHON, &port],
            Relay::Bash => vec!["bash", "-c", BASH, "relay", &port],
        };
        argv.into_iter().map(str::to_string).collect()
    }

    /// Asks container `id` (as `user`) which relay it has, with one exec of `sh`.
    ///
    /// Errors: [`OpsError::Unsupported`] naming what to install when it has none (or no
    /// `sh` to ask with); the engine's.
    pub async fn probe(engine: &dyn Engine, id: &str, user: Option<&str>) -> Result<Relay> {
        let request = ExecRequest {
            argv: vec!["sh".into(), "-c".into(), PROBE.into()],
            user: user.map(str::to_string),
            ..ExecRequest::default()
        };
        let result = engine
            .exec(id, &request, ExecInput::None, ExecOutput::Collect)
            .await?;
        Relay::from_probe(&result.stdout_text()).ok_or_else(|| OpsError::Unsupported {
            message: format!(
                "container {} has no program `ports` can relay a connection with (looked for socat, nc, busybox's nc, python3, bash with cat{})",
                crate::ops::target::short(id),
                if result.exit_code == 0 { String::new() } else { format!("; `sh` to look with exited {}", result.exit_code) },
            ),
            hint: Some(
                "install one in the image (`socat`, or `netcat-openbsd` on Debian/Ubuntu, `busybox` on Alpine), then run `ports` again".into(),
            ),
        })
    }
}

/// Where one accepted connection goes: container `id`, as `user`, through `relay`, to
/// `127.0.0.1:port` inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayTarget {
    /// The container.
    pub id: String,
    /// The exec's user (`None`: the container's own user).
    pub user: Option<String>,
    /// The relay program.
    pub relay: Relay,
    /// The container port.
    pub port: u16,
}

/// Relays `stream` to `target` until either side closes: one exec whose stdin is what the
/// host's client sends and whose stdout goes back to it. Returns the relay's failure (its exit
/// code and the end of its stderr, e.g. `Connection refused` when nothing listens inside)
/// as `Some(text)`, `None` when it ended cleanly.
///
/// Errors: the engine's (the container is gone, the exec could not start).
pub async fn relay_connection(
    engine: &dyn Engine,
    target: &RelayTarget,
    stream: TcpStream,
) -> Result<Option<String>> {
    let (read, write) = stream.into_split();
    let request = ExecRequest {
        argv: target.relay.argv(target.port),
        user: target.user.clone(),
        ..ExecRequest::default()
    };
    let mut stderr = Tail::default();
    let result = engine
        .exec(
            &target.id,
            &request,
            ExecInput::Stream(Box::new(read)),
            ExecOutput::Write {
                stdout: Box::new(write),
                stderr: Box::new(&mut stderr),
            },
        )
        .await?;
    Ok((result.exit_code != 0).then(|| {
        let said = String::from_utf8_lossy(&stderr.0).trim().to_string();
        if said.is_empty() {
            format!("the relay exited {}", result.exit_code)
        } else {
            format!("the relay exited {}: {said}", result.exit_code)
        }
    }))
}

/// The last [`Tail::KEEP`] bytes written to it: a relay's stderr, bounded whatever the
/// container writes.
#[derive(Debug, Default)]
struct Tail(Vec<u8>);

impl Tail {
    const KEEP: usize = 512;
}

impl AsyncWrite for Tail {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.extend_from_slice(buf);
        let excess = self.0.len().saturating_sub(Self::KEEP);
        self.0.drain(..excess);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_relay_in_preference_order_is_chosen() {
        assert_eq!(Relay::from_probe("nc\npython3\n"), Some(Relay::Nc));
        assert_eq!(Relay::from_probe("bash\nsocat\n"), Some(Relay::Socat));
        assert_eq!(Relay::from_probe("busybox-nc\n"), Some(Relay::BusyboxNc));
        assert_eq!(Relay::from_probe("/usr/bin/nc\nsh: oops\n"), None);
        assert_eq!(Relay::from_probe(""), None);
    }

    #[test]
    fn every_relay_connects_to_loopback_only() {
        for relay in [
            Relay::Socat,
            Relay::Nc,
            Relay::BusyboxNc,
            Relay::Python3,
            Relay::Bash,
        ] {
            let argv = relay.argv(8080);
            let text = argv.join(" ");
            assert!(
                text.contains("127.0.0.1") && text.contains("8080"),
                "{relay:?}: {argv:?}"
            );
        }
        assert_eq!(Relay::Nc.argv(80), ["nc", "127.0.0.1", "80"]);
        assert_eq!(Relay::Socat.argv(80), ["socat", "-", "TCP:127.0.0.1:80"]);
    }

    /// Runs `relay`'s argv on this host (the container's side is a host process here: no
    /// image here has socat or python3) against a loopback server that answers `pong:` and
    /// what it read: the relay must carry both directions and end when the server closes.
    fn relays_on_the_host(relay: Relay) {
        use std::io::{Read as _, Write as _};
        let program = relay.argv(1)[0].clone();
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            // this host lacks it: nothing to run (the argv is still pinned by
            // `every_relay_connects_to_loopback_only`)
            return;
        }
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let serving = std::thread::spawn(move || {
            let (mut stream, _) = server.accept().unwrap();
            let mut got = [0u8; 4];
            stream.read_exact(&mut got).unwrap();
            stream.write_all(b"pong:").unwrap();
            stream.write_all(&got).unwrap();
        });
        let argv = relay.argv(port);
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"ping").unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        drop(stdin);
        let _ = child.wait();
        serving.join().unwrap();
        assert_eq!(out, "pong:ping", "{relay:?}");
    }

    #[test]
    fn the_python_relay_carries_both_directions() {
        relays_on_the_host(Relay::Python3);
    }

    #[test]
    fn the_socat_relay_carries_both_directions() {
        relays_on_the_host(Relay::Socat);
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_only() {
        use tokio::io::AsyncWriteExt as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut tail = Tail::default();
        rt.block_on(async {
            tail.write_all(&[b'a'; 600]).await.unwrap();
            tail.write_all(b"refused").await.unwrap();
        });
        assert_eq!(tail.0.len(), Tail::KEEP);
        assert!(tail.0.ends_with(b"refused"));
    }
}
