//! Host paths the repository influences, resolved before they are judged and used
//! (spec-note 0400, class 1).
//!
//! A repository can commit symbolic links (git stores them) and write `..` in any path its
//! `devcontainer.json` names, so the text of a path says nothing about where it lands. Every
//! host path devcell reads, packs or mounts for a repository goes through here:
//!
//! - [`resolve`] turns it into a canonical path (no symbolic link, no `..`), following links
//!   the way the kernel does, dangling ones included;
//! - [`Places::place`] / [`confine`] judge the *resolved* path (inside the workspace, the
//!   engine socket, the host home, `/`, elsewhere);
//! - the caller hands the resolved path on ([`resolve_binds`] rewrites a container's bind
//!   sources), so what was judged is what the engine uses and a link swapped after the check
//!   does not matter.
//!
//! devcell's own writes into the workspace (`.devcell/context.json`, `AGENTS.md`, the
//! Features lockfile) go through [`WorkspaceDir`]: every folder below the workspace root is
//! opened relative to its parent's handle with `O_NOFOLLOW`, and files are created and renamed
//! relative to that handle, so a `.devcell` or `AGENTS.md` that is (or becomes) a symbolic link
//! never makes a write land outside the workspace.

mod binds;
mod compose_volumes;
mod covers;
mod judge;
mod resolution;
mod workspace_dir;

pub use binds::{ResolvedBind, keep_covered, keep_read_only, resolve_binds};
pub(crate) use compose_volumes::{bind_backed_source, bind_backed_volume};
pub use compose_volumes::{compose_cover_additions, compose_read_only_additions};
pub use covers::{Cover, Covered, cover_bind};
pub use judge::{Place, Places, confine, confine_links, read_no_follow};
pub use resolution::{MAX_LINKS, resolve};
pub use workspace_dir::{Existing, OutputDir, WorkspaceDir, WriteError};

/// The temporary tree and places the unit tests of every file here share.
#[cfg(test)]
mod fixtures {
    use std::path::{Path, PathBuf};

    use super::Places;

    /// A temp tree: `ws/` (the workspace, with `sub/`), `host/secret.txt` outside it.
    pub(super) fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let ws = base.join("ws");
        let host = base.join("host");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("secret.txt"), "s").unwrap();
        (t, ws, host)
    }

    /// The places of a workspace `ws`, with `/root` as the home and `/run/docker.sock` as
    /// the engine socket.
    pub(super) fn places(ws: &Path) -> Places {
        Places::new(
            ws,
            Some(Path::new("/root")),
            Some(Path::new("/run/docker.sock")),
        )
    }
}
