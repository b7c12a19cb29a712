//! Judging a resolved host path: where it lies ([`Places`]), whether devcell may read or
//! pack it ([`confine`], [`confine_links`]), and reading it without following a link
//! swapped in after the judgement ([`read_no_follow`]).

use std::ffi::OsStr;
use std::io::{self, Read as _};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use super::resolution::resolve;
use crate::security::error::{Result, SecurityError};
use crate::security::policy::{Grants, Permission, is_engine_socket, is_within};

/// The host places a resolved path is judged against, themselves resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// The workspace folder (canonical).
    pub workspace: PathBuf,
    /// The host user's home folder (canonical), if known.
    pub home: Option<PathBuf>,
    /// The engine socket devcell talks to (canonical), if any.
    pub engine_socket: Option<PathBuf>,
}

impl Places {
    /// Resolves each place ([`resolve`]; a place that cannot be resolved is kept as given).
    pub fn new(workspace: &Path, home: Option<&Path>, engine_socket: Option<&Path>) -> Places {
        let canonical = |p: &Path| resolve(p).unwrap_or_else(|_| p.to_path_buf());
        Places {
            workspace: canonical(workspace),
            home: home.map(canonical),
            engine_socket: engine_socket.map(canonical),
        }
    }

    /// Where the resolved path `resolved` lies.
    pub fn place(&self, resolved: &Path) -> Place {
        let text = resolved.to_string_lossy();
        if text == "/" {
            return Place::Root;
        }
        if is_engine_socket(&text, self.engine_socket.as_deref()) {
            return Place::EngineSocket;
        }
        if is_within(&text, &self.workspace.to_string_lossy()) {
            return Place::Workspace;
        }
        if let Some(home) = &self.home {
            let home = home.to_string_lossy();
            if is_within(&text, &home) || is_within(&home, &text) {
                return Place::HostHome;
            }
        }
        Place::Outside
    }
}

/// Where a resolved host path lies ([`Places::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The workspace folder or inside it.
    Workspace,
    /// An engine socket or a folder holding one ([`is_engine_socket`]).
    EngineSocket,
    /// The host home folder, inside it, or a folder holding it.
    HostHome,
    /// The host's root folder.
    Root,
    /// Anywhere else on the host.
    Outside,
}

impl Place {
    /// A few words for messages: `the workspace`, `the host's root folder`, ….
    pub fn describe(self) -> &'static str {
        match self {
            Place::Workspace => "inside the workspace",
            Place::EngineSocket => "the container engine's socket (or a folder holding it)",
            Place::HostHome => "the host home folder",
            Place::Root => "the host's root folder",
            Place::Outside => "outside the workspace",
        }
    }
}

/// Judges a host path the repository names that devcell would *read or pack* (the
/// `devcontainer.json` itself, `build.dockerfile`, `build.context`, a local Feature folder):
/// `what` names it in errors (`build.context`), `written` is the path as written (made
/// absolute by the caller). Returns the resolved path, to be used instead of `written`.
///
/// Inside the workspace: allowed. Outside: allowed only when `grants` holds
/// `--allow mount:<resolved path>` (or a folder above it); never for an engine socket, the
/// host's root folder or a folder holding the home folder. Nothing is read here but link
/// targets.
///
/// Errors: [`SecurityError::PathOutside`] naming `what`, the path as written, what it
/// resolves to and where that is; [`SecurityError::PathUnresolvable`] for a link loop.
pub fn confine(what: &str, written: &Path, places: &Places, grants: &Grants) -> Result<PathBuf> {
    let resolved = resolve(written).map_err(|e| SecurityError::PathUnresolvable {
        what: what.to_string(),
        written: written.to_path_buf(),
        message: e.to_string(),
    })?;
    let place = places.place(&resolved);
    let grantable = match place {
        Place::Workspace => return Ok(resolved),
        Place::Outside => true,
        // a grant of the home folder itself may read files below it, never above it
        Place::HostHome => places
            .home
            .as_deref()
            .is_some_and(|h| resolved.starts_with(h)),
        Place::EngineSocket | Place::Root => false,
    };
    let permission = Permission::Mount(resolved.to_string_lossy().into_owned());
    if grantable && grants.allows(&permission) {
        return Ok(resolved);
    }
    Err(SecurityError::PathOutside {
        what: what.to_string(),
        written: written.to_path_buf(),
        resolved,
        place: place.describe(),
        grant: grantable.then(|| permission.grant_flag()).flatten(),
    })
}

/// Reads the file at the canonical path `resolved` (what [`confine`] returned) without
/// following any symbolic link: every folder from `/` down is opened relative to its parent
/// with `O_NOFOLLOW`, then the file itself, so a link swapped in after the judgement makes the
/// read fail instead of reaching another file. At most `max` bytes: a larger file (or a FIFO,
/// a device: anything but a regular file) is an error, never a hang. `Ok(None)`: no such file.
///
/// Errors: `ELOOP`/`ENOTDIR` (a part became a symbolic link; the message says so),
/// `InvalidData` for a file above `max` bytes or not a regular file, any other read error.
pub fn read_no_follow(resolved: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let linked = |e: rustix::io::Errno| -> io::Error {
        if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
            io::Error::other(format!(
                "`{}`: a part of the path is a symbolic link (changed after it was judged): not read",
                resolved.display()
            ))
        } else {
            e.into()
        }
    };
    if !resolved.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not an absolute path", resolved.display()),
        ));
    }
    let parts: Vec<&OsStr> = resolved
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let Some((name, folders)) = parts.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "`/` is not a file",
        ));
    };
    let mut dir = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for folder in folders {
        dir = match rustix::fs::openat(
            &dir,
            *folder,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(linked(e)),
        };
    }
    let fd = match rustix::fs::openat(
        &dir,
        *name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(linked(e)),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("`{}` is not a regular file: not read", resolved.display()),
        ));
    }
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is larger than {max} bytes: not read",
                resolved.display()
            ),
        )
    };
    if stat.st_size as u64 > max {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(Some(bytes))
}

/// Judges every symbolic link below the folder `dir` (the folder itself judged by the caller
/// with [`confine`]), without following any: each link is resolved ([`resolve`]) and must land
/// inside the workspace or be granted, as [`confine`] decides; `what` names the folder in
/// errors (`local Feature `./f``). Real sub-folders are walked; links never are, so the walk
/// ends. Used where a folder's content is packed for a build (local Features): a link out of
/// the workspace would carry a host path into an image.
///
/// Errors: as [`confine`], naming the link; [`SecurityError::PathUnresolvable`] for a folder
/// that cannot be read.
pub fn confine_links(what: &str, dir: &Path, places: &Places, grants: &Grants) -> Result<()> {
    let unreadable = |path: &Path, e: io::Error| SecurityError::PathUnresolvable {
        what: what.to_string(),
        written: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(&folder, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| unreadable(&folder, e))?;
            let kind = entry
                .file_type()
                .map_err(|e| unreadable(&entry.path(), e))?;
            if kind.is_symlink() {
                let rel = entry
                    .path()
                    .strip_prefix(dir)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| entry.path());
                confine(
                    &format!("{what}: `{}`", rel.display()),
                    &entry.path(),
                    places,
                    grants,
                )?;
            } else if kind.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::host_path::fixtures::{places, tree};
    use std::os::unix::fs::symlink;

    #[test]
    fn places_are_judged_on_the_resolved_path() {
        let (_t, ws, host) = tree();
        let p = places(&ws);
        assert_eq!(p.place(&ws.join("sub")), Place::Workspace);
        assert_eq!(p.place(&host), Place::Outside);
        assert_eq!(p.place(Path::new("/")), Place::Root);
        assert_eq!(p.place(Path::new("/run")), Place::EngineSocket);
        assert_eq!(p.place(Path::new("/root/.ssh")), Place::HostHome);
    }

    #[test]
    fn confine_refuses_outside_names_both_paths_and_honours_a_mount_grant() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("ctx")).unwrap();
        let p = places(&ws);
        assert_eq!(
            confine("build.context", &ws.join("sub"), &p, &Grants::default()).unwrap(),
            ws.join("sub")
        );
        let err = confine("build.context", &ws.join("ctx"), &p, &Grants::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&ws.join("ctx").display().to_string()),
            "{text}"
        );
        assert!(text.contains(&host.display().to_string()), "{text}");
        let hint = crate::diagnostics::Hint::hint(&err).unwrap();
        assert!(
            hint.contains(&format!("--allow mount:{}", host.display())),
            "{hint}"
        );
        let grants = Grants::parse(&[format!("mount:{}", host.display())]).unwrap();
        assert_eq!(
            confine("build.context", &ws.join("ctx"), &p, &grants).unwrap(),
            host
        );
        // `/` and the engine socket's folder are never granted
        symlink("/", ws.join("r")).unwrap();
        let all = Grants::parse(&["mount:/"]).unwrap();
        assert!(confine("build.context", &ws.join("r"), &p, &all).is_err());
        assert!(confine("build.context", Path::new("/run"), &p, &all).is_err());
    }

    #[test]
    fn reads_never_follow_a_link_swapped_in_after_the_judgement() {
        let (_t, ws, host) = tree();
        std::fs::write(ws.join("sub/lock.json"), "{}").unwrap();
        assert_eq!(
            read_no_follow(&ws.join("sub/lock.json"), 1024).unwrap(),
            Some(b"{}".to_vec())
        );
        assert_eq!(read_no_follow(&ws.join("sub/missing"), 1024).unwrap(), None);
        assert_eq!(
            read_no_follow(&ws.join("nope/missing"), 1024).unwrap(),
            None
        );
        // the file, or a folder on its way, is a link (swapped after `confine`): not read
        symlink(host.join("secret.txt"), ws.join("link.json")).unwrap();
        let e = read_no_follow(&ws.join("link.json"), 1024).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        symlink(&host, ws.join("dir")).unwrap();
        let e = read_no_follow(&ws.join("dir/secret.txt"), 1024).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // bounded, regular files only (a FIFO never blocks the read)
        std::fs::write(ws.join("big"), vec![b'x'; 2048]).unwrap();
        assert!(read_no_follow(&ws.join("big"), 1024).is_err());
        assert!(read_no_follow(Path::new("/dev/zero"), 1024).is_err());
        assert!(read_no_follow(&ws.join("sub"), 1024).is_err());
    }

    #[test]
    fn links_below_a_folder_are_judged_where_they_end() {
        let (_t, ws, host) = tree();
        let p = places(&ws);
        std::fs::create_dir_all(ws.join("f/deep")).unwrap();
        std::fs::write(ws.join("shared.sh"), "x").unwrap();
        symlink("../shared.sh", ws.join("f/ok.sh")).unwrap();
        assert!(
            confine_links("local Feature `./f`", &ws.join("f"), &p, &Grants::default()).is_ok()
        );
        symlink(host.join("secret.txt"), ws.join("f/deep/install.sh")).unwrap();
        let e = confine_links("local Feature `./f`", &ws.join("f"), &p, &Grants::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("deep/install.sh") && e.contains(&host.display().to_string()),
            "{e}"
        );
        let grants = Grants::parse(&[format!("mount:{}", host.display())]).unwrap();
        assert!(confine_links("local Feature `./f`", &ws.join("f"), &p, &grants).is_ok());
    }
}
