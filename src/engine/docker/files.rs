//! Files in containers through the archive API: read one file, read a folder's direct files,
//! write one file, copy a tree of folders and regular files ([`tree_archive`]).

use std::collections::BTreeMap;

use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use futures_util::StreamExt;

use super::{DockerEngine, is_not_found};
use crate::engine::Engine;
use crate::engine::TreeCopy;
use crate::engine::error::{EngineError, Result};

impl DockerEngine {
    /// The tar archive the engine gives for `path` in container `id` (the archive API), whole;
    /// `None` when the container has no such path. `operation` names the request in errors.
    ///
    /// Errors: [`EngineError::NoSuchContainer`], [`EngineError::Api`].
    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        operation: &'static str,
    ) -> Result<Option<Vec<u8>>> {
        let options = DownloadFromContainerOptions {
            path: path.to_string(),
        };
        let mut stream = self.docker.download_from_container(id, Some(options));
        let mut archive = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => archive.extend_from_slice(&bytes),
                Err(e) if is_not_found(&e) && archive.is_empty() => {
                    // 404 is both "no such container" and "no such path".
                    return match self.inspect_container(id).await? {
                        Some(_) => Ok(None),
                        None => Err(EngineError::NoSuchContainer { id: id.to_string() }),
                    };
                }
                Err(e) => return Err(self.api(operation, &format!("{id}:{path}"))(e)),
            }
        }
        Ok(Some(archive))
    }

    /// [`Engine::read_file`].
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, path = %path))]
    pub(super) async fn read_regular_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let Some(archive) = self.download_archive(id, path, "read file").await? else {
            return Ok(None);
        };
        let io = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        let mut tar = tar::Archive::new(archive.as_slice());
        let mut entries = tar.entries().map_err(io)?;
        let Some(entry) = entries.next() else {
            return Ok(None);
        };
        let mut entry = entry.map_err(io)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Ok(None);
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content).map_err(io)?;
        Ok(Some(content))
    }

    /// [`Engine::read_file_resolved`]: the file itself when it is regular; for a symbolic
    /// link, the path the engine's stat of it gives as its `linkTarget` (Docker resolves every
    /// link of the path inside the container's root, as it does for an exec's user), read when
    /// that is a regular file. One hop: the target is already fully resolved.
    ///
    /// Errors: as [`Engine::read_file`], and the stat's.
    pub(super) async fn read_resolved_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        if let Some(content) = self.read_regular_file(id, path).await? {
            return Ok(Some(content));
        }
        let options = bollard::query_parameters::ContainerArchiveInfoOptions {
            path: path.to_string(),
        };
        let answer = self
            .docker
            .get_container_archive_info(id, Some(options))
            .await;
        let Some(stat) = self.found(answer, "stat file", &format!("{id}:{path}"))? else {
            return Ok(None);
        };
        let target = stat.link_target;
        if target.is_empty() || target == path || !target.starts_with('/') {
            return Ok(None);
        }
        self.read_regular_file(id, &target).await
    }

    /// [`Engine::read_folder`].
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, path = %path))]
    pub(super) async fn read_direct_files(
        &self,
        id: &str,
        path: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        let Some(archive) = self.download_archive(id, path, "read folder").await? else {
            return Ok(None);
        };
        let io = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        // The archive holds `<folder name>/` and its content; only direct regular files count.
        let mut files = BTreeMap::new();
        let mut tar = tar::Archive::new(archive.as_slice());
        for entry in tar.entries().map_err(io)? {
            let mut entry = entry.map_err(io)?;
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let name = {
                let path = entry.path().map_err(io)?;
                let parts: Vec<_> = path.components().collect();
                match parts.as_slice() {
                    [_, file] => file.as_os_str().to_string_lossy().into_owned(),
                    _ => continue,
                }
            };
            let mut content = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut content).map_err(io)?;
            files.insert(name, content);
        }
        Ok(Some(files))
    }

    /// [`Engine::write_file`].
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, folder = %folder))]
    pub(super) async fn upload_file(
        &self,
        id: &str,
        folder: &str,
        name: &str,
        content: &[u8],
    ) -> Result<()> {
        let folder = folder.trim_end_matches('/');
        let (parent, base) = folder.rsplit_once('/').unwrap_or(("", folder));
        let io = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        let mut builder = tar::Builder::new(Vec::new());
        builder
            .append_data(&mut header, format!("{base}/{name}"), content)
            .map_err(io)?;
        let archive = builder.into_inner().map_err(io)?;
        let options = UploadToContainerOptions {
            path: if parent.is_empty() {
                "/".to_string()
            } else {
                parent.to_string()
            },
            ..UploadToContainerOptions::default()
        };
        self.docker
            .upload_to_container(id, Some(options), bollard::body_full(archive.into()))
            .await
            .map_err(self.api("write file", &format!("{id}:{folder}/{name}")))
    }

    /// [`Engine::copy_tree`].
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, into = %tree.into))]
    pub(super) async fn upload_tree(&self, id: &str, tree: &TreeCopy) -> Result<()> {
        let archive = tree_archive(tree).map_err(|source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        })?;
        let options = UploadToContainerOptions {
            path: tree.into.clone(),
            ..UploadToContainerOptions::default()
        };
        self.docker
            .upload_to_container(id, Some(options), bollard::body_full(archive.into()))
            .await
            .map_err(self.api("copy tree", &format!("{id}:{}", tree.into)))
    }
}

/// The tar archive of `tree` ([`Engine::copy_tree`]), built by the `tar` crate: a GNU header
/// per entry, folders and regular files only, `tree`'s owner on each, the mode's permission
/// bits only (no set-id or sticky bit), the time of now.
///
/// Errors: [`std::io::ErrorKind::InvalidInput`] for an entry whose path is not plain
/// ([`crate::engine::TreeEntry::has_plain_path`]); the `tar` crate's.
fn tree_archive(tree: &TreeCopy) -> std::io::Result<Vec<u8>> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut builder = tar::Builder::new(Vec::new());
    for entry in &tree.entries {
        if !entry.has_plain_path() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("not a plain relative path: {:?}", entry.path),
            ));
        }
        let mut header = tar::Header::new_gnu();
        header.set_mode(entry.mode & 0o777);
        header.set_uid(u64::from(tree.uid));
        header.set_gid(u64::from(tree.gid));
        header.set_mtime(now);
        match &entry.content {
            Some(content) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(content.len() as u64);
                builder.append_data(&mut header, &entry.path, content.as_slice())?;
            }
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder.append_data(&mut header, format!("{}/", entry.path), std::io::empty())?;
            }
        }
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TreeEntry;

    fn entry(path: &str, mode: u32, content: Option<&str>) -> TreeEntry {
        TreeEntry {
            path: path.to_string(),
            mode,
            content: content.map(|c| c.as_bytes().to_vec()),
        }
    }

    /// spec-note 0685: folders and regular files only, the one owner, permission bits only.
    #[test]
    fn a_tree_archive_holds_folders_and_files_with_the_owner_and_sane_modes() {
        let tree = TreeCopy {
            into: "/var/lib/devcell".to_string(),
            entries: vec![
                entry("top", 0o700, None),
                entry("top/dots.git", 0o755, None),
                entry("top/dots.git/HEAD", 0o4755, Some("ref: refs/heads/main\n")),
            ],
            uid: 1000,
            gid: 1001,
        };
        let bytes = tree_archive(&tree).unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut seen = Vec::new();
        for e in archive.entries().unwrap() {
            let mut e = e.unwrap();
            let h = e.header().clone();
            let mut content = String::new();
            std::io::Read::read_to_string(&mut e, &mut content).unwrap();
            seen.push((
                e.path().unwrap().to_string_lossy().into_owned(),
                h.entry_type(),
                h.mode().unwrap(),
                (h.uid().unwrap(), h.gid().unwrap()),
                content,
            ));
        }
        assert_eq!(
            seen,
            [
                (
                    "top/".into(),
                    tar::EntryType::Directory,
                    0o700,
                    (1000, 1001),
                    String::new()
                ),
                (
                    "top/dots.git/".into(),
                    tar::EntryType::Directory,
                    0o755,
                    (1000, 1001),
                    String::new()
                ),
                (
                    "top/dots.git/HEAD".into(),
                    tar::EntryType::Regular,
                    0o755,
                    (1000, 1001),
                    "ref: refs/heads/main\n".into()
                ),
            ]
        );
        for bad in ["", "/etc/passwd", "a/../b", "./a", "a//b"] {
            let tree = TreeCopy {
                entries: vec![entry(bad, 0o644, Some("x"))],
                ..tree.clone()
            };
            assert!(tree_archive(&tree).is_err(), "{bad:?}");
        }
    }
}
