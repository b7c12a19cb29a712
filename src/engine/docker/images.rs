//! Images: inspect, pull, build, tag, push, list and remove, with registry credentials from
//! the Docker client configuration; references in Docker's familiar form.

use std::collections::HashMap;

use bollard::auth::DockerCredentials;
use bollard::query_parameters::{
    BuildImageOptions, CreateImageOptions, ListImagesOptions, PushImageOptions, RemoveImageOptions,
};
use futures_util::StreamExt;

use super::{DockerEngine, blocking, is_not_found, sorted};
use crate::diagnostics::LineSplitter;
use crate::engine::error::{EngineError, Result};
use crate::engine::spec::*;
use crate::engine::{Engine, auth, context};
use crate::formats::image_reference::ImageReference;
use crate::progress::{Event, Reporter};

impl DockerEngine {
    /// [`Engine::inspect_image`].
    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    pub(super) async fn image_info(&self, reference: &str) -> Result<Option<ImageInfo>> {
        let answer = self.docker.inspect_image(reference).await;
        Ok(self
            .found(answer, "inspect image", reference)?
            .map(image_info_from))
    }

    /// [`Engine::pull_image`].
    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    pub(super) async fn pull(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        // Credential helpers are processes and the config a file: off the async workers.
        let parsed = parse_reference(reference)?;
        let owned = parsed.clone();
        let credentials = blocking(move || credentials_for(&owned)).await?;
        let options = CreateImageOptions {
            from_image: Some(parsed.name().to_string()),
            tag: Some(parsed.tag_or_digest().to_string()),
            ..CreateImageOptions::default()
        };
        let mut stream = self.docker.create_image(Some(options), None, credentials);
        let mut last = String::new();
        while let Some(item) = stream.next().await {
            let info = item.map_err(self.lost_or(|source| EngineError::Pull {
                reference: reference.to_string(),
                source,
            }))?;
            if let Some(status) = info.status {
                let line = match info.id {
                    Some(id) => format!("{id}: {status}"),
                    None => status,
                };
                // Progress ticks repeat the same status; report each change once.
                if line != last && info.progress_detail.is_none_or(|p| p.current.is_none()) {
                    reporter.report(Event::Status(line.clone()));
                    last = line;
                }
            }
        }
        Ok(())
    }

    /// [`Engine::build_image`].
    #[tracing::instrument(level = "debug", skip_all)]
    pub(super) async fn build(
        &self,
        request: &BuildRequest,
        reporter: &dyn Reporter,
    ) -> Result<ImageInfo> {
        let (context_dir, dockerfile) = (request.context.clone(), request.dockerfile.clone());
        let judged = request.dockerfile_bytes.clone();
        let within = request.context_within.clone();
        let packed = blocking(move || {
            context::pack_within(
                &context_dir,
                &dockerfile,
                judged.as_deref(),
                within.as_deref(),
            )
        })
        .await?;
        let options = BuildImageOptions {
            dockerfile: packed.dockerfile.clone(),
            t: request.tags.first().cloned(),
            target: request.target.clone().unwrap_or_default(),
            cachefrom: (!request.cache_from.is_empty()).then(|| request.cache_from.clone()),
            buildargs: (!request.args.is_empty()).then(|| {
                request
                    .args
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }),
            labels: (!request.labels.is_empty()).then(|| {
                request
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }),
            nocache: request.no_cache,
            pull: request.pull.then(|| "1".to_string()),
            rm: true,
            forcerm: true,
            networkmode: request.network.clone(),
            platform: request.platform.clone().unwrap_or_default(),
            ..BuildImageOptions::default()
        };
        // Registry credentials for the base images: every registry in the client config.
        let creds = auth::for_build()?;
        let body = bollard::body_full(packed.tar.into());
        let subject = request
            .tags
            .first()
            .cloned()
            .unwrap_or_else(|| request.context.display().to_string());
        let mut stream = self.docker.build_image(options, creds, Some(body));
        // bounded lines in linear work, whatever a build step prints (spec-note 0658)
        let mut lines = LineSplitter::default();
        let mut image_id: Option<String> = None;
        while let Some(item) = stream.next().await {
            let info = match item {
                Ok(i) => i,
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Err(EngineError::Build { message: error });
                }
                Err(e) => return Err(self.api("build image", &subject)(e)),
            };
            if let Some(text) = info.stream {
                lines.push(text.as_bytes(), |l| reporter.report(Event::Output(l)));
            }
            if let Some(detail) = info.error_detail {
                return Err(EngineError::Build {
                    message: detail
                        .message
                        .unwrap_or_else(|| "unknown error".to_string()),
                });
            }
            if let Some(id) = info.aux.and_then(|a| a.id) {
                image_id = Some(id);
            }
        }
        if let Some(tail) = lines.finish() {
            reporter.report(Event::Output(tail));
        }
        for tag in request.tags.iter().skip(1) {
            let source = request.tags[0].clone();
            self.tag_image(&source, tag).await?;
        }
        let lookup =
            request
                .tags
                .first()
                .cloned()
                .or(image_id)
                .ok_or_else(|| EngineError::Build {
                    message: "the engine did not report the built image".to_string(),
                })?;
        self.inspect_image(&lookup)
            .await?
            .ok_or_else(|| EngineError::Build {
                message: format!("the built image `{lookup}` is not listed by the engine"),
            })
    }

    /// [`Engine::push_image`].
    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    pub(super) async fn push(
        &self,
        reference: &str,
        reporter: &dyn Reporter,
    ) -> Result<Option<String>> {
        let parsed = parse_reference(reference)?;
        let owned = parsed.clone();
        let credentials = blocking(move || credentials_for(&owned)).await?;
        let options = PushImageOptions {
            tag: Some(parsed.tag_or_digest().to_string()),
            platform: None,
        };
        let mut stream = self
            .docker
            .push_image(parsed.name(), Some(options), credentials);
        let (mut last, mut digest) = (String::new(), None);
        while let Some(item) = stream.next().await {
            let info = item.map_err(self.lost_or(|source| EngineError::Push {
                reference: reference.to_string(),
                message: match source {
                    bollard::errors::Error::DockerStreamError { error } => error,
                    other => other.to_string(),
                },
            }))?;
            if let Some(status) = info.status {
                digest = digest.or_else(|| pushed_digest(&status));
                if status != last && info.progress_detail.is_none_or(|p| p.current.is_none()) {
                    reporter.report(Event::Status(status.clone()));
                    last = status;
                }
            }
        }
        Ok(digest)
    }

    /// [`Engine::list_images`].
    pub(super) async fn images_matching(&self, reference: &str) -> Result<Vec<ImageSummary>> {
        let options = ListImagesOptions {
            filters: Some(HashMap::from([(
                "reference".to_string(),
                vec![reference.to_string()],
            )])),
            ..ListImagesOptions::default()
        };
        let list = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(self.api("list images", reference))?;
        Ok(list
            .into_iter()
            .map(|i| ImageSummary {
                id: i.id,
                parent_id: i.parent_id,
                repo_tags: i
                    .repo_tags
                    .iter()
                    .filter(|t| *t != "<none>:<none>")
                    .map(|t| familiar_reference(t))
                    .collect(),
                created: i.created,
                size: i.size,
            })
            .collect())
    }

    /// [`Engine::remove_image`].
    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    pub(super) async fn delete_image(&self, reference: &str) -> Result<Vec<String>> {
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            platforms: None,
        };
        match self
            .docker
            .remove_image(reference, Some(options), None)
            .await
        {
            Ok(items) => Ok(items
                .into_iter()
                .filter_map(|i| i.deleted)
                .map(|id| image_id(&id))
                .collect()),
            Err(e) if is_not_found(&e) => Ok(Vec::new()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) => Err(EngineError::ImageInUse {
                reference: reference.to_string(),
                message,
            }),
            Err(e) => Err(self.api("remove image", reference)(e)),
        }
    }
}

fn credentials_for(reference: &ImageReference) -> Result<Option<DockerCredentials>> {
    auth::for_registry(reference.registry())
}

/// The manifest digest in the engine's final push status line
/// (`<tag>: digest: sha256:<64 hex> size: <n>`), if `status` is that line.
fn pushed_digest(status: &str) -> Option<String> {
    let rest = status.split_once("digest: ")?.1;
    let digest = rest.split_whitespace().next()?;
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| digest.to_string())
}

/// `reference` parsed ([`ImageReference`]).
///
/// Errors: [`EngineError::InvalidReference`] naming what the grammar refused, before the engine
/// is asked.
pub(crate) fn parse_reference(reference: &str) -> Result<ImageReference> {
    ImageReference::parse(reference).map_err(|e| EngineError::InvalidReference {
        reference: e.reference,
        message: e.source.to_string(),
    })
}

/// A tag or digest reference (`name:tag`, `name@sha256:…`) in Docker's familiar form
/// ([`ImageReference::familiar`]): Podman reports Docker Hub names fully qualified
/// (`docker.io/library/alpine:3`, `docker.io/devcell/features:…`) where Docker says `alpine:3`,
/// `devcell/features:…`, so callers (prune's `devcell/features` match, build's base digest) see
/// one spelling whatever the engine (spec-notes/0080). Other registries (`localhost/`,
/// `ghcr.io/`) and what is no reference (`<none>:<none>`) are kept.
///
/// Only a spelling that starts with `docker.io/` can change, so any other is returned without
/// parsing: the reference grammar's first use compiles a large regular expression (about
/// 40 ms), which a new container's image inspect would otherwise pay (issue 12 item 8).
pub(crate) fn familiar_reference(reference: &str) -> String {
    if !reference.starts_with("docker.io/") {
        return reference.to_string();
    }
    ImageReference::parse(reference)
        .map(|r| r.familiar())
        .unwrap_or_else(|_| reference.to_string())
}

/// An image id in Docker's form, `sha256:<hex>`: Podman reports deleted images by the bare hex.
pub(crate) fn image_id(id: &str) -> String {
    if !id.contains(':') && id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("sha256:{id}")
    } else {
        id.to_string()
    }
}

/// The neutral [`ImageInfo`] of the engine's image inspect answer.
pub(super) fn image_info_from(image: bollard::models::ImageInspect) -> ImageInfo {
    let config = image.config.unwrap_or_default();
    ImageInfo {
        id: image.id.unwrap_or_default(),
        repo_digests: familiar(image.repo_digests),
        repo_tags: familiar(image.repo_tags),
        user: config.user.filter(|u| !u.is_empty()),
        env: config.env.unwrap_or_default(),
        labels: sorted(config.labels),
        entrypoint: config.entrypoint,
        cmd: config.cmd,
        working_dir: config.working_dir.filter(|w| !w.is_empty()),
        on_build: config.on_build.unwrap_or_default(),
        layers: image.root_fs.and_then(|r| r.layers).unwrap_or_default(),
    }
}

fn familiar(references: Option<Vec<String>>) -> Vec<String> {
    references
        .unwrap_or_default()
        .iter()
        .map(|r| familiar_reference(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_familiar_shortcut_agrees_with_the_parsed_reference() {
        let hex = "b".repeat(64);
        for written in [
            "busybox".to_string(),
            "busybox:1".to_string(),
            "devcell-test/busybox:1".to_string(),
            "docker.io/library/alpine:3".to_string(),
            "docker.io/devcell/features:1".to_string(),
            format!("docker.io/library/alpine@sha256:{hex}"),
            "index.docker.io/library/alpine:3".to_string(),
            "localhost:5000/a/b:1".to_string(),
            "<none>:<none>".to_string(),
            format!("busybox@sha256:{hex}"),
        ] {
            let parsed = ImageReference::parse(&written)
                .map(|r| r.familiar())
                .unwrap_or_else(|_| written.clone());
            assert_eq!(familiar_reference(&written), parsed, "{written}");
        }
        assert_eq!(familiar_reference("docker.io/library/alpine:3"), "alpine:3");
    }

    #[test]
    fn pushed_digest_reads_the_final_status_line() {
        let hex = "a".repeat(64);
        assert_eq!(
            pushed_digest(&format!("1: digest: sha256:{hex} size: 527")),
            Some(format!("sha256:{hex}"))
        );
        assert_eq!(pushed_digest("Pushed"), None);
        assert_eq!(pushed_digest("1: digest: sha256:abc size: 1"), None);
        assert_eq!(pushed_digest("digest: md5:00 size: 1"), None);
    }

    #[test]
    fn podman_references_become_dockers_familiar_ones() {
        for (podman, docker) in [
            ("docker.io/library/alpine:3", "alpine:3"),
            (
                "docker.io/library/alpine@sha256:{hex}",
                "alpine@sha256:{hex}",
            ),
            ("docker.io/devcell/features:k", "devcell/features:k"),
            ("docker.io/library/vsc-ws-1:latest", "vsc-ws-1:latest"),
            ("docker.io/library/a/b:1", "library/a/b:1"),
            ("devcell/uid:k", "devcell/uid:k"),
            (
                "localhost/devcell-test/busybox:1",
                "localhost/devcell-test/busybox:1",
            ),
            ("ghcr.io/x/y:1", "ghcr.io/x/y:1"),
            (
                "127.0.0.1:5000/x@sha256:{hex}",
                "127.0.0.1:5000/x@sha256:{hex}",
            ),
            ("<none>:<none>", "<none>:<none>"),
            ("<none>@<none>", "<none>@<none>"),
        ] {
            let hex = "ab".repeat(32);
            let (podman, docker) = (podman.replace("{hex}", &hex), docker.replace("{hex}", &hex));
            assert_eq!(familiar_reference(&podman), docker);
        }
    }

    #[test]
    fn podman_deleted_ids_get_the_digest_algorithm() {
        let hex = "b5883b5d3ded92e7266ee2653fcea5893d720696cb3fa139ef50bfe27513c6f2";
        assert_eq!(image_id(hex), format!("sha256:{hex}"));
        assert_eq!(image_id(&format!("sha256:{hex}")), format!("sha256:{hex}"));
        assert_eq!(image_id("abc"), "abc");
    }
}
