//! `devcell-mail`: the in-container end of devcell's mail channel (the door, issue 30;
//! spec-note 0531). A dumb pipe: it parses nothing. It sends its arguments to devcell on the
//! host over the task's Unix socket (`/.devcell-mail/mail.sock`, bind-mounted read-only into
//! the sandbox; `DEVCELL_MAIL_SOCKET` names another), sends its standard input only when the
//! host asks for it (at most the bytes the host accepts, one more to show it was longer), writes
//! what the host answers to standard output and standard error, and exits with the host's
//! status. Every option, every message and all JSON are handled by devcell on the host
//! (`devcell-mail --help` is the host's help).
//!
//! Exit status 2 with a message on standard error when there is no channel (not in a devcell
//! task sandbox, or the handoff has ended) or the channel breaks before the host's answer.
//!
//! Built by devcell's `build.rs` as a static executable from this file and `frame.rs`, std
//! only, so it runs in any Linux image (busybox, glibc, musl), as any user, with no network.

#[allow(dead_code)]
mod frame;

use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

/// Where the socket is unless `DEVCELL_MAIL_SOCKET` says otherwise.
const SOCKET: &str = "/.devcell-mail/mail.sock";

/// The largest frame accepted from the host (its answers are small; this bounds a broken one).
const MAX_FROM_HOST: usize = 16 << 20;

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(io::stderr(), "devcell-mail: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let socket = std::env::var_os("DEVCELL_MAIL_SOCKET").unwrap_or_else(|| SOCKET.into());
    let mut conn = match UnixStream::connect(&socket) {
        Ok(c) => c,
        Err(e) => {
            return fail(&format!(
                "no mail channel at {}: {e} (devcell-mail works only inside a devcell task sandbox while its handoff runs)",
                std::path::Path::new(&socket).display()
            ));
        }
    };
    match run(&mut conn) {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail(&format!("the mail channel broke before devcell answered: {e}")),
    }
}

/// Sends the argv, then serves the host's frames until its exit status.
fn run(conn: &mut UnixStream) -> Result<u8, frame::FrameError> {
    let mut hello = frame::MAGIC.to_vec();
    for arg in std::env::args_os().skip(1) {
        let arg = arg.as_bytes();
        hello.push(frame::op::ARG);
        hello.extend_from_slice(&(arg.len() as u32).to_be_bytes());
        hello.extend_from_slice(arg);
    }
    hello.extend_from_slice(&[frame::op::GO, 0, 0, 0, 0]);
    conn.write_all(&hello)?;
    let (mut stdout, mut stderr) = (io::stdout(), io::stderr());
    loop {
        let Some((op, payload)) = frame::read_frame(conn, frame::op::FROM_HOST, MAX_FROM_HOST)?
        else {
            return Err(frame::FrameError::Truncated);
        };
        match op {
            frame::op::STDOUT => {
                let _ = stdout.write_all(&payload);
            }
            frame::op::STDERR => {
                let _ = stderr.write_all(&payload);
            }
            frame::op::WANT_STDIN => {
                let max = payload
                    .get(..4)
                    .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64);
                send_stdin(conn, max + 1)?;
            }
            _ => {
                let _ = stdout.flush();
                let _ = stderr.flush();
                return Ok(payload.first().copied().unwrap_or(1));
            }
        }
    }
}

/// Sends at most `limit` bytes of standard input in chunks, then the end.
fn send_stdin(conn: &mut UnixStream, limit: u64) -> io::Result<()> {
    let mut input = io::stdin().lock().take(limit);
    let mut buf = vec![0u8; frame::STDIN_CHUNK];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        frame::write_frame(conn, frame::op::STDIN, &buf[..n])?;
    }
    frame::write_frame(conn, frame::op::STDIN_END, &[])
}
