//! The door's wire format (issue 30; spec-note 0531): the tiny binary framing between the
//! in-container `devcell-mail` and devcell's host-side door server, one connection per
//! command. std only: this file is compiled into the crate and, as a module of
//! `client_main.rs`, into the static in-container executable (`build.rs`), so both sides
//! share one definition.
//!
//! A connection starts with the client's [`MAGIC`], then frames: one byte of [`op`] and a
//! big-endian `u32` payload length, then the payload. The client sends its argv (one
//! [`op::ARG`] per argument, then [`op::GO`]); the host answers with [`op::STDOUT`] and
//! [`op::STDERR`] bytes and one [`op::EXIT`] (the status, one byte), and may first ask for the
//! client's standard input with [`op::WANT_STDIN`] (payload: the most bytes it accepts, `u32`),
//! which the client sends as [`op::STDIN`] chunks and [`op::STDIN_END`]. Nothing is parsed on
//! the client: no JSON, no options.

use std::io::{self, Read, Write};

/// The first four bytes a client sends (`DCM` and the protocol version, 1).
pub const MAGIC: [u8; 4] = *b"DCM\x01";

/// A frame header's length: the op byte and the `u32` payload length.
pub const HEADER_LEN: usize = 5;

/// The most bytes one [`op::STDIN`] frame carries (the client splits its input).
pub const STDIN_CHUNK: usize = 64 * 1024;

/// The frame kinds.
pub mod op {
    /// client → host: one argument of the command line (without `devcell-mail` itself).
    pub const ARG: u8 = b'a';
    /// client → host: the argv is complete.
    pub const GO: u8 = b'g';
    /// client → host: a chunk of standard input (after [`WANT_STDIN`]).
    pub const STDIN: u8 = b'i';
    /// client → host: standard input ended (or the client stopped at the host's bound).
    pub const STDIN_END: u8 = b'z';
    /// host → client: bytes for standard output.
    pub const STDOUT: u8 = b'o';
    /// host → client: bytes for standard error.
    pub const STDERR: u8 = b'e';
    /// host → client: send standard input, at most the `u32` payload's bytes (one more tells
    /// the host it was longer).
    pub const WANT_STDIN: u8 = b'w';
    /// host → client: the exit status (one byte); the last frame.
    pub const EXIT: u8 = b'x';

    /// The ops a client may send.
    pub const FROM_CLIENT: &[u8] = &[ARG, GO, STDIN, STDIN_END];
    /// The ops the host may send.
    pub const FROM_HOST: &[u8] = &[STDOUT, STDERR, WANT_STDIN, EXIT];
}

/// A frame that could not be read.
#[derive(Debug)]
pub enum FrameError {
    /// The connection failed (or timed out).
    Io(io::Error),
    /// The connection ended inside a header or a payload.
    Truncated,
    /// A payload longer than the reader accepts (nothing of it was read).
    TooLarge {
        /// The length the header announced.
        len: u64,
        /// The reader's bound.
        max: usize,
    },
    /// An op this side does not accept.
    UnknownOp(u8),
    /// The connection did not start with [`MAGIC`] (another program, or another version).
    BadMagic,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "channel: {e}"),
            FrameError::Truncated => f.write_str("channel: a frame was cut short"),
            FrameError::TooLarge { len, max } => {
                write!(
                    f,
                    "channel: a frame of {len} bytes exceeds the limit of {max}"
                )
            }
            FrameError::UnknownOp(op) => write!(f, "channel: unknown frame kind {op:#04x}"),
            FrameError::BadMagic => {
                f.write_str("channel: not a devcell-mail connection (or another version)")
            }
        }
    }
}

impl std::error::Error for FrameError {}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> FrameError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    }
}

/// Writes one frame (header and payload in one write, so frames never interleave).
pub fn write_frame(w: &mut impl Write, op: u8, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame payload over 4 GiB"))?;
    let mut buf = Vec::with_capacity(HEADER_LEN + payload.len());
    buf.push(op);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)
}

/// Reads one frame whose op is in `allowed` and whose payload is at most `max` bytes.
/// `Ok(None)`: the connection ended cleanly before a header.
pub fn read_frame(
    r: &mut impl Read,
    allowed: &[u8],
    max: usize,
) -> Result<Option<(u8, Vec<u8>)>, FrameError> {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let op = header[0];
    if !allowed.contains(&op) {
        return Err(FrameError::UnknownOp(op));
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > max {
        return Err(FrameError::TooLarge {
            len: len as u64,
            max,
        });
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(Some((op, payload)))
}

/// Reads and checks the client's [`MAGIC`].
pub fn read_magic(r: &mut impl Read) -> Result<(), FrameError> {
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic)?;
    if magic == MAGIC {
        Ok(())
    } else {
        Err(FrameError::BadMagic)
    }
}
