//! Files in containers through the archive API: read one file, read a folder's direct files,
//! write one file.

use std::collections::BTreeMap;

use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use futures_util::StreamExt;

use super::{DockerEngine, is_not_found};
use crate::engine::Engine;
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
}
