//! The Dockerfile build request of a configuration (`build.dockerfile`, `context`, `args`,
//! `target`, `cacheFrom`, `options`) and the name of its image.

use crate::engine::BuildRequest;
use crate::ops::error::Result;
use crate::ops::load::LoadedConfiguration;
use std::collections::HashMap;
use std::path::Path;

/// The build request of a Dockerfile config: `build.dockerfile`, `context`, `args`, `target`,
/// `cacheFrom`, and the `build.options` the engine maps
/// ([`crate::engine::build_options::apply_build_options`]); any other option is an error
/// naming it. The image is named like the reference CLI's: `vsc-<folder>-<sha256 of its path>`.
pub fn build_request(
    loaded: &LoadedConfiguration,
    host_env: &HashMap<String, String>,
) -> Result<BuildRequest> {
    let build = loaded.typed.build.clone().unwrap_or_default();
    let dockerfile = loaded
        .typed
        .dockerfile_path(&loaded.config_file)
        .unwrap_or_default();
    let context = loaded
        .typed
        .context_path(&loaded.config_file)
        .unwrap_or_default();
    let mut request = BuildRequest {
        context,
        dockerfile,
        tags: vec![image_name(&loaded.workspace_folder)],
        args: build.args.clone(),
        target: build.target.clone(),
        cache_from: build.cache_from.clone(),
        ..BuildRequest::default()
    };
    crate::engine::build_options::apply_build_options(&mut request, &build.options, &|name| {
        host_env.get(name).cloned()
    })?;
    Ok(request)
}

/// `vsc-<basename>-<sha256 hex of the workspace path>`, lowercased, other characters removed.
pub(crate) fn image_name(workspace: &Path) -> String {
    use sha2::{Digest, Sha256};
    let base: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let hash = hex::encode(Sha256::digest(workspace.to_string_lossy().as_bytes()));
    format!("vsc-{base}-{hash}")
}
