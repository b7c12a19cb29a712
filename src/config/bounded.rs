//! Reading a file the user or the repository names without trusting what it is: at most a
//! bound of bytes, and never blocking for ever (spec-note 0433).
//!
//! A path can name a FIFO (`mkfifo`, or a FIFO the container made in the workspace), a device
//! (`/dev/zero`, `/dev/tty`, reached directly or through a committed symlink) or a huge file.
//! `std::fs::read` would wait for a writer that never comes, or read until memory runs out.
//! [`read`] opens with `O_NONBLOCK` (so opening a FIFO does not wait for a writer), reads a
//! regular file up to the bound, reads a pipe (`--secrets-file <(pass show x)`) up to the bound
//! and for at most [`PIPE_DEADLINE`], and refuses anything else (devices, directories,
//! sockets) with an error naming what the path is.

use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::OFlags;

/// How long [`read`] waits for a pipe's writer to finish.
pub const PIPE_DEADLINE: Duration = Duration::from_secs(5);

/// Reads the whole file at `path`, following symlinks, refusing more than `max_bytes`.
///
/// Errors (each an [`io::Error`] whose message says what to fix; callers add the path):
/// - [`io::ErrorKind::InvalidInput`] for something that is neither a regular file nor a pipe
///   ("is a character device, not a regular file");
/// - [`io::ErrorKind::FileTooLarge`] past `max_bytes` ("is larger than … bytes");
/// - [`io::ErrorKind::TimedOut`] for a pipe whose writer neither writes nor closes within
///   [`PIPE_DEADLINE`];
/// - the open or read error itself.
pub fn read(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    let too_large = || {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("is larger than {max_bytes} bytes ({})", human(max_bytes)),
        )
    };
    let mut out = Vec::new();
    if kind.is_file() {
        // `O_NONBLOCK` has no effect on a regular file: a plain bounded read.
        file.by_ref().take(max_bytes + 1).read_to_end(&mut out)?;
        if out.len() as u64 > max_bytes {
            return Err(too_large());
        }
        return Ok(out);
    }
    if !kind.is_fifo() {
        let what = if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_dir() {
            "a folder"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {what}, not a regular file"),
        ));
    }
    // A pipe: read what arrives until its writer closes it, the bound, or the deadline. A FIFO
    // nobody opened for writing reads as empty at once.
    let deadline = Instant::now() + PIPE_DEADLINE;
    let mut buf = [0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() as u64 > max_bytes {
                    return Err(too_large());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "is a pipe whose writer sent no end of file within {} s",
                            PIPE_DEADLINE.as_secs()
                        ),
                    ));
                }
                let timeout = Timespec {
                    tv_sec: left.as_secs() as _,
                    tv_nsec: left.subsec_nanos() as _,
                };
                let mut fds = [PollFd::new(&file, PollFlags::IN)];
                match poll(&mut fds, Some(&timeout)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads the file as UTF-8 text; see [`read`]. Invalid UTF-8 is
/// [`io::ErrorKind::InvalidData`].
pub fn read_to_string(path: &Path, max_bytes: u64) -> io::Result<String> {
    String::from_utf8(read(path, max_bytes)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "is not valid UTF-8"))
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_up_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read(&f, 5).unwrap(), b"12345");
        let err = read(&f, 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "is larger than 4 bytes (4 bytes)");
        assert_eq!(read_to_string(&f, 10).unwrap(), "12345");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_to_string(&f, 10).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn devices_and_folders_are_refused_at_once() {
        let start = Instant::now();
        for (path, what) in [("/dev/zero", "a character device"), ("/", "a folder")] {
            let err = read(Path::new(path), 1 << 20).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{path}");
            assert!(err.to_string().contains(what), "{path}: {err}");
        }
        // Through a symlink too (a repository can commit one).
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("devcontainer.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read(&link, 1 << 20).is_err());
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn fifos_never_block_for_ever() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o600)).unwrap();
        // Nobody writes: empty at once.
        let start = Instant::now();
        assert_eq!(read(&fifo, 100).unwrap(), b"");
        assert!(start.elapsed() < Duration::from_secs(1));
        // A writer that holds it open and sends nothing: the deadline.
        let _writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let err = read(&fifo, 100).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(start.elapsed() < PIPE_DEADLINE + Duration::from_secs(2));
    }

    #[test]
    fn a_pipe_is_read_to_its_end_or_the_bound() {
        // What a shell's `<(…)` hands over: `/dev/fd/N`, a pipe.
        use std::os::fd::AsRawFd;
        let (reader, mut writer) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut writer, br#"{"A": "1"}"#).unwrap();
        drop(writer);
        let path = format!("/proc/self/fd/{}", reader.as_raw_fd());
        assert_eq!(read(Path::new(&path), 100).unwrap(), br#"{"A": "1"}"#);
        let (reader, mut writer) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut writer, &[b' '; 200]).unwrap();
        let path = format!("/proc/self/fd/{}", reader.as_raw_fd());
        let err = read(Path::new(&path), 100).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
    }
}
