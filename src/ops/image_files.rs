//! Files of images, remembered on the host by image id: an image id names its content, so a
//! file read once from an image never changes. `up` reads the remote user's `/etc/passwd` entry
//! for the hardened profile's home tmpfs; with this, a new container from an image it has seen
//! needs no throwaway container to read it again (spec-note 0471).
//!
//! Layout: `<state root>/images/<hex of the image id>/<file name>` (folders `0700`), written
//! atomically; anything unreadable is simply read from the engine again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::Engine;
use crate::ops::state_folder;

fn cached_path(root: &Path, image_id: &str, file: &str) -> Option<PathBuf> {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    let name = file.rsplit('/').next()?;
    (!hex.is_empty()
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && !name.is_empty()
        && name != ".."
        && name != ".")
        .then(|| root.join("images").join(hex).join(name))
}

/// The content of the regular file `path` of the image `reference` whose id is `image_id`:
/// from the host record when one exists, else through the engine
/// ([`Engine::read_image_file`]: a container created, read and removed, never started), then
/// recorded. `Ok(None)` when the image has no such regular file.
///
/// Errors: the engine's.
pub async fn read(
    engine: &dyn Engine,
    reference: &str,
    image_id: &str,
    path: &str,
) -> crate::engine::Result<Option<Vec<u8>>> {
    read_in(
        state_folder::default_root().as_deref(),
        engine,
        reference,
        image_id,
        path,
    )
    .await
}

async fn read_in(
    root: Option<&Path>,
    engine: &dyn Engine,
    reference: &str,
    image_id: &str,
    path: &str,
) -> crate::engine::Result<Option<Vec<u8>>> {
    let cached = root.and_then(|r| cached_path(r, image_id, path));
    if let Some(bytes) = cached.as_deref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(Some(bytes));
    }
    let content = engine.read_image_file(reference, path).await?;
    if let (Some(file), Some(bytes)) = (cached, &content) {
        let _ = write(&file, bytes);
    }
    Ok(content)
}

/// The `/etc/passwd` the engine resolves an exec's user against in the container `info`, for
/// judging that user (spec-note 0420): its image's file, read by image id (cached like
/// `ops::users::image_passwd`). Docker looks users up in the container's root filesystem without its
/// mounts, which under `hardened` is read-only, so it is the image's; the container's own view
/// (what an archive read gives) includes binds and volumes the repository chose. `None` when it
/// cannot be read as a regular file, or when a mount covers `/`, `/etc` or `/etc/passwd` (an
/// engine that resolves inside the mounts, as Podman may, would read another file): a name is
/// then not judgeable.
pub(crate) async fn engine_passwd(
    engine: &dyn Engine,
    info: &crate::engine::ContainerInfo,
) -> Option<String> {
    let covered = info.mounts.iter().any(|m| {
        let d = m.destination.trim_end_matches('/');
        d.is_empty() || d == "/etc" || d == "/etc/passwd"
    });
    if covered || info.image_id.is_empty() {
        return None;
    }
    let bytes = read(engine, &info.image_id, &info.image_id, "/etc/passwd").await;
    Some(crate::engine::passwd::text_of(&bytes.ok()??))
}

/// The image's `/etc/passwd` for the container `info`, whatever the container mounts over it:
/// what turns the remote user's name into the numeric `uid:gid` every exec runs as under
/// `hardened` ([`crate::ops::exec_user`]). With numbers the engine resolves nothing, so a
/// mount at `/`, `/etc` or `/etc/passwd` changes nothing the engine does with them; giving up
/// the numbers there (as [`engine_passwd`] must for judging a name) would hand exec back to
/// the name and the image's groups (attack finding J6). `None` when it cannot be read as a
/// regular file.
pub(crate) async fn image_passwd_of(
    engine: &dyn Engine,
    info: &crate::engine::ContainerInfo,
) -> Option<String> {
    if info.image_id.is_empty() {
        return None;
    }
    let bytes = read(engine, &info.image_id, &info.image_id, "/etc/passwd").await;
    Some(crate::engine::passwd::text_of(&bytes.ok()??))
}

/// The name of an image's recorded labels in its folder of the host record (no image file
/// devcell reads is so named).
const LABELS_FILE: &str = ".labels.json";

/// The labels of the image whose id is `image_id` (a container's `image_id`): from the host
/// record when one exists, else inspected and recorded (an id names its content, so its labels
/// never change). `None`: the engine does not know the image. Used to tell a container's
/// identity labels set at its creation from those its image gives every container
/// (attack 28, F4; spec-note 0421).
///
/// Errors: the engine's.
pub(crate) async fn image_labels(
    engine: &dyn Engine,
    image_id: &str,
) -> crate::engine::Result<Option<BTreeMap<String, String>>> {
    let root = state_folder::default_root();
    let cached = root
        .as_deref()
        .and_then(|r| cached_path(r, image_id, LABELS_FILE));
    if let Some(labels) = cached
        .as_deref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    {
        return Ok(Some(labels));
    }
    let Some(info) = engine.inspect_image(image_id).await? else {
        return Ok(None);
    };
    remember_labels_in(root.as_deref(), &info);
    Ok(Some(info.labels))
}

/// Records the labels of `image` (inspected while a container is made from it), so the next
/// lookup of that container reads them from the host ([`image_labels`]): a warm `up` keeps
/// its engine calls (spec-note 0400).
pub(crate) fn remember_labels(image: &crate::engine::ImageInfo) {
    remember_labels_in(state_folder::default_root().as_deref(), image);
}

fn remember_labels_in(root: Option<&Path>, image: &crate::engine::ImageInfo) {
    let Some(file) = root.and_then(|r| cached_path(r, &image.id, LABELS_FILE)) else {
        return;
    };
    if let Ok(bytes) = serde_json::to_vec(&image.labels) {
        let _ = write(&file, &bytes);
    }
}

fn write(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = file.parent().unwrap_or(file);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hex_ids_and_plain_names_make_a_path() {
        let root = Path::new("/s");
        assert_eq!(
            cached_path(root, "sha256:ab12", "/etc/passwd"),
            Some(PathBuf::from("/s/images/ab12/passwd"))
        );
        assert_eq!(cached_path(root, "sha256:../x", "/etc/passwd"), None);
        assert_eq!(cached_path(root, "", "/etc/passwd"), None);
        assert_eq!(cached_path(root, "ab", "/etc/.."), None);
    }
}
