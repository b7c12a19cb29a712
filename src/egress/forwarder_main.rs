//! devcell's egress forwarder: the only program devcell puts into an `allowlist` container.
//!
//! `devcell-egress-forwarder LISTEN SOCKET [-- COMMAND ARGS...]`
//!
//! Listens on the TCP address `LISTEN` (the container's loopback, e.g. `127.0.0.1:3128`) and
//! relays every accepted connection, byte for byte both ways, to the Unix socket `SOCKET`
//! (devcell's host-side proxy, bind-mounted into the container). It decides nothing: the
//! policy is enforced on the host. Without `--` it prints `listening LISTEN` on stdout once
//! the port is bound and serves until killed; with `-- COMMAND ...` it binds, runs the command
//! (the port is ready before it starts) and exits with the command's status. With
//! `--background` it binds, hands the bound socket to a copy of itself (as that copy's stdin,
//! no other descriptor), prints `listening LISTEN` and exits: the engine's exec returns while
//! the copy serves. A port already bound prints `in-use LISTEN` and exits 0 (a forwarder
//! started by an earlier `up` still serves it).
//!
//! Built by devcell's `build.rs` as a static executable from this one std-only file, so it
//! runs on any Linux image (busybox, glibc, musl) without installing anything, as any user.

use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::thread;

fn usage() -> ExitCode {
    let _ = writeln!(
        io::stderr(),
        "usage: devcell-egress-forwarder LISTEN SOCKET [--background | -- COMMAND ARGS...]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (own, command) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], Some(&args[i + 1..])),
        None => (&args[..], None),
    };
    let (listen, socket, mode) = match own {
        [listen, socket] => (listen, socket, None),
        [listen, socket, mode] if mode == "--background" || mode == "--serve-stdin" => {
            (listen, socket, Some(mode.as_str()))
        }
        _ => return usage(),
    };
    if command.is_some_and(|c| c.is_empty()) || (mode.is_some() && command.is_some()) {
        return usage();
    }
    let bound = if mode == Some("--serve-stdin") {
        // the listener the `--background` parent bound, as stdin
        io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(TcpListener::from)
    } else {
        TcpListener::bind(listen.as_str())
    };
    let listener = match bound {
        Ok(l) => l,
        Err(e) if mode == Some("--background") && e.kind() == io::ErrorKind::AddrInUse => {
            let _ = writeln!(io::stdout(), "in-use {listen}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = writeln!(io::stderr(), "devcell-egress-forwarder: bind {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    if mode == Some("--background") {
        let Ok(exe) = std::env::current_exe() else {
            return ExitCode::from(1);
        };
        let spawned = Command::new(exe)
            .arg(listen)
            .arg(socket)
            .arg("--serve-stdin")
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        return match spawned {
            Ok(_) => {
                let _ = writeln!(io::stdout(), "listening {listen}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                let _ = writeln!(io::stderr(), "devcell-egress-forwarder: spawn: {e}");
                ExitCode::from(1)
            }
        };
    }
    let socket = Arc::new(PathBuf::from(socket));
    let serve = {
        let socket = Arc::clone(&socket);
        move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let socket = Arc::clone(&socket);
                thread::spawn(move || relay(conn, &socket));
            }
        }
    };
    match command {
        None if mode == Some("--serve-stdin") => {
            serve();
            ExitCode::from(1)
        }
        None => {
            let _ = writeln!(io::stdout(), "listening {listen}");
            let _ = io::stdout().flush();
            serve();
            ExitCode::from(1)
        }
        Some(command) => {
            thread::spawn(serve);
            match Command::new(&command[0]).args(&command[1..]).status() {
                Ok(status) => match status.code() {
                    Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
                    None => ExitCode::from(128),
                },
                Err(e) => {
                    let _ = writeln!(io::stderr(), "devcell-egress-forwarder: {}: {e}", command[0]);
                    ExitCode::from(127)
                }
            }
        }
    }
}

/// Copies both ways until each side has closed; a failed connect to the proxy closes the
/// client's connection (it sees an empty reply, never a direct route).
fn relay(tcp: TcpStream, socket: &PathBuf) {
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = tcp.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(mut tcp_read), Ok(mut unix_write)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let upstream = thread::spawn(move || {
        let _ = io::copy(&mut tcp_read, &mut unix_write);
        let _ = unix_write.shutdown(Shutdown::Write);
    });
    let (mut unix_read, mut tcp_write) = (unix, tcp);
    let _ = io::copy(&mut unix_read, &mut tcp_write);
    let _ = tcp_write.shutdown(Shutdown::Write);
    let _ = upstream.join();
}
