//! The door's host-side server (issue 30; spec-note 0531): one per task while its handoff runs,
//! on the task's socket ([`super::SocketFolder`]). Every connection is one `devcell-mail`
//! command: the server reads its argv (bounded in count and bytes), hands it to a
//! [`DoorHandler`] with the sender stamped from the socket (the task the socket belongs to:
//! the container cannot name another), lets the handler ask for the client's standard input
//! (bounded), and writes the handler's [`Answer`] back. Malformed connections (another
//! protocol, an unknown frame kind, a truncated or oversized frame) are refused with a message
//! and exit status 2, and reported to the handler ([`DoorHandler::refused`]).
//!
//! Plain threads: one accepting, one per connection (at most [`Limits::max_connections`] at
//! once), each read and write bounded by [`Limits::timeout`].

use crate::handoff::failure::IoFailed;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::frame::{self, FrameError, op};
use super::{DoorError, SocketFolder};

/// What the host answers one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// Bytes for the command's standard output.
    pub stdout: Vec<u8>,
    /// Bytes for its standard error.
    pub stderr: Vec<u8>,
    /// Its exit status.
    pub status: u8,
}

impl Answer {
    /// Status 0 with `stdout`.
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Answer {
        Answer {
            stdout: stdout.into(),
            ..Answer::default()
        }
    }

    /// `status` with `stderr`.
    pub fn fail(status: u8, stderr: impl Into<Vec<u8>>) -> Answer {
        Answer {
            stderr: stderr.into(),
            status,
            ..Answer::default()
        }
    }
}

/// Why the client's standard input could not be had.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// It is longer than the handler accepts (nothing of it is used).
    #[error("standard input is longer than {max} bytes")]
    TooLarge {
        /// The bound.
        max: usize,
    },
    /// The channel failed while reading it (or it was asked for twice).
    #[error("{0}")]
    Channel(String),
}

/// The client's standard input, sent only when asked for.
pub trait Input {
    /// All of the client's standard input, at most `max` bytes.
    ///
    /// Errors: [`InputError::TooLarge`] when it is longer, [`InputError::Channel`].
    fn read(&mut self, max: usize) -> Result<Vec<u8>, InputError>;
}

/// What answers the commands of one task's socket.
pub trait DoorHandler: Send + Sync {
    /// Answers `argv` (the command's arguments, without `devcell-mail`) from `sender` (the
    /// task whose socket it came through), reading `input` only when the command needs it.
    fn handle(&self, sender: &str, argv: &[String], input: &mut dyn Input) -> Answer;

    /// A connection from `sender` refused before its command ran (`why`); the default
    /// ignores it.
    fn refused(&self, _sender: &str, _why: &str) {}
}

/// The server's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most arguments of one command.
    pub max_args: usize,
    /// The most bytes of all arguments of one command together.
    pub max_argv_bytes: usize,
    /// The most connections served at once (more are answered "busy", status 75).
    pub max_connections: usize,
    /// How long one read or write on a connection may wait.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_args: 256,
            max_argv_bytes: 1 << 20,
            max_connections: 16,
            timeout: Duration::from_secs(60),
        }
    }
}

/// A running server; stopped (and its socket removed) by [`DoorServer::stop`] or on drop.
#[derive(Debug)]
pub struct DoorServer {
    socket: PathBuf,
    stopping: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl DoorServer {
    /// Binds `folder`'s socket (replacing a stale one; mode 0666: the container's user, whatever
    /// its uid, connects) and serves it for `sender` with `handler`.
    ///
    /// Errors: [`DoorError::Io`].
    pub fn start(
        folder: &SocketFolder,
        sender: &str,
        handler: Arc<dyn DoorHandler>,
        limits: Limits,
    ) -> Result<DoorServer, DoorError> {
        let socket = folder.socket();
        let io = |source| {
            DoorError::Io(IoFailed {
                path: socket.clone(),
                source,
            })
        };
        match std::fs::remove_file(&socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
            _ => {}
        }
        let listener = UnixListener::bind(&socket).map_err(io)?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).map_err(io)?;
        let stopping = Arc::new(AtomicBool::new(false));
        let sender = sender.to_string();
        let accepting = {
            let stopping = Arc::clone(&stopping);
            std::thread::spawn(move || accept_loop(listener, &sender, handler, limits, &stopping))
        };
        Ok(DoorServer {
            socket,
            stopping,
            accepting: Some(accepting),
        })
    }

    /// The socket's host path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Stops accepting and removes the socket (a later `devcell-mail` finds no channel);
    /// commands being answered finish on their own threads.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        let Some(accepting) = self.accepting.take() else {
            return;
        };
        self.stopping.store(true, Ordering::SeqCst);
        // wake the blocked accept
        let _ = UnixStream::connect(&self.socket);
        let _ = accepting.join();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for DoorServer {
    fn drop(&mut self) {
        self.shut();
    }
}

fn accept_loop(
    listener: UnixListener,
    sender: &str,
    handler: Arc<dyn DoorHandler>,
    limits: Limits,
    stopping: &AtomicBool,
) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(limits.timeout));
        let _ = conn.set_write_timeout(Some(limits.timeout));
        if active.fetch_add(1, Ordering::SeqCst) >= limits.max_connections {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = write_answer(
                &mut conn,
                &Answer::fail(75, "devcell-mail: the channel is busy; try again\n"),
            );
            continue;
        }
        let (handler, active, sender) = (
            Arc::clone(&handler),
            Arc::clone(&active),
            sender.to_string(),
        );
        std::thread::spawn(move || {
            let _ = serve(&mut conn, &sender, &*handler, &limits);
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Serves one connection: the argv read and checked, the handler's answer written. A
/// malformed connection is answered with its error (status 2) and reported to the handler.
///
/// Errors: the frame error that ended the connection.
pub fn serve(
    conn: &mut (impl Read + Write),
    sender: &str,
    handler: &dyn DoorHandler,
    limits: &Limits,
) -> Result<(), FrameError> {
    let argv = match read_argv(conn, limits) {
        Ok(argv) => argv,
        Err(e) => {
            handler.refused(sender, &e.to_string());
            if !matches!(e, FrameError::BadMagic | FrameError::Io(_)) {
                let _ = write_answer(conn, &Answer::fail(2, format!("devcell-mail: {e}\n")));
            }
            return Err(e);
        }
    };
    let answer = {
        let mut input = StreamInput {
            conn: &mut *conn,
            asked: false,
        };
        handler.handle(sender, &argv, &mut input)
    };
    write_answer(conn, &answer).map_err(FrameError::from)
}

/// Reads the magic and the argv (bounded; every argument UTF-8).
fn read_argv(conn: &mut impl Read, limits: &Limits) -> Result<Vec<String>, FrameError> {
    frame::read_magic(conn)?;
    let mut argv = Vec::new();
    let mut bytes = 0usize;
    loop {
        let room = limits.max_argv_bytes - bytes;
        let Some((kind, payload)) = frame::read_frame(conn, &[op::ARG, op::GO], room)? else {
            return Err(FrameError::Truncated);
        };
        if kind == op::GO {
            return Ok(argv);
        }
        if argv.len() == limits.max_args {
            return Err(FrameError::TooLarge {
                len: (argv.len() + 1) as u64,
                max: limits.max_args,
            });
        }
        bytes += payload.len();
        let arg = String::from_utf8(payload).map_err(|_| {
            FrameError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "an argument is not UTF-8",
            ))
        })?;
        argv.push(arg);
    }
}

fn write_answer(conn: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    if !answer.stdout.is_empty() {
        frame::write_frame(conn, op::STDOUT, &answer.stdout)?;
    }
    if !answer.stderr.is_empty() {
        frame::write_frame(conn, op::STDERR, &answer.stderr)?;
    }
    frame::write_frame(conn, op::EXIT, &[answer.status])?;
    conn.flush()
}

/// The client's standard input over its connection, asked for once.
struct StreamInput<'a, S> {
    conn: &'a mut S,
    asked: bool,
}

impl<S: Read + Write> Input for StreamInput<'_, S> {
    fn read(&mut self, max: usize) -> Result<Vec<u8>, InputError> {
        if std::mem::replace(&mut self.asked, true) {
            return Err(InputError::Channel(
                "standard input was already read".into(),
            ));
        }
        let channel = |e: FrameError| InputError::Channel(e.to_string());
        let bound = u32::try_from(max).unwrap_or(u32::MAX);
        frame::write_frame(self.conn, op::WANT_STDIN, &bound.to_be_bytes())
            .map_err(|e| channel(e.into()))?;
        let mut data = Vec::new();
        loop {
            match frame::read_frame(self.conn, &[op::STDIN, op::STDIN_END], frame::STDIN_CHUNK)
                .map_err(channel)?
            {
                None => return Err(channel(FrameError::Truncated)),
                Some((op::STDIN_END, _)) => break,
                Some((_, chunk)) => {
                    // the client sends at most one byte more than the bound; more is refused
                    if data.len() + chunk.len() > max + 1 {
                        return Err(InputError::TooLarge { max });
                    }
                    data.extend_from_slice(&chunk);
                }
            }
        }
        if data.len() > max {
            return Err(InputError::TooLarge { max });
        }
        Ok(data)
    }
}
