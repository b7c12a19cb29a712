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
    // a context judged inside the workspace must still be there when it is packed (attack
    // 29, G6; spec-note 0673); one the user granted outside it is opened as given
    let workspace = std::fs::canonicalize(&loaded.workspace_folder).ok();
    let context_within =
        workspace.filter(|w| std::fs::canonicalize(&context).is_ok_and(|c| c.starts_with(w)));
    let mut request = BuildRequest {
        context,
        context_within,
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

/// `vsc-<basename>-<sha256 hex of the workspace path>`, lowercased, characters an image name
/// cannot hold removed, and each run of separators (`.`, `_`, `-`) made one the reference grammar
/// accepts ([`valid_separators`]): a folder named `a_-b` gives `vsc-a_b-…`, never the invalid
/// `vsc-a_-b-…` the engine refuses ("invalid reference format"). Spec-note 0479.
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
    valid_separators(&format!("vsc-{base}-{hash}"))
}

/// Makes every run of separator characters in `name` (lowercase ASCII letters, digits, `.`,
/// `_`, `-`) a separator the OCI/Docker reference grammar accepts between two alphanumeric
/// parts (`.`, `_`, `__`, or one or more `-`), choosing as the reference CLI does for its
/// default image names: a run that already is one stays; otherwise a run starting with `.` is
/// `.`, one starting with `_` is `_` (`__` when it starts with `__`), one starting
/// with dashes keeps those dashes and drops the rest. The caller keeps alphanumerics at both
/// ends (`vsc-` … hash).
fn valid_separators(name: &str) -> String {
    let is_separator = |c: char| matches!(c, '.' | '_' | '-');
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if !is_separator(c) {
            out.push(c);
            continue;
        }
        let mut run = String::from(c);
        while let Some(&next) = chars.peek() {
            if !is_separator(next) {
                break;
            }
            run.push(next);
            chars.next();
        }
        let dashes = run.len() - run.trim_start_matches('-').len();
        let kept = if run.len() == 1 || run == "__" || dashes == run.len() {
            &run[..]
        } else if dashes > 0 {
            &run[..dashes]
        } else if run.starts_with("__") {
            "__"
        } else {
            &run[..1]
        };
        out.push_str(kept);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separator_runs_become_valid_separators() {
        for (name, want) in [
            ("vsc-a_-b-0", "vsc-a_b-0"),
            ("vsc-a-_b-0", "vsc-a-b-0"),
            ("vsc-a.-b-0", "vsc-a.b-0"),
            ("vsc-a..b-0", "vsc-a.b-0"),
            ("vsc-a__b-0", "vsc-a__b-0"),
            ("vsc-a___b-0", "vsc-a__b-0"),
            ("vsc-a__-b-0", "vsc-a__b-0"),
            ("vsc-a---b-0", "vsc-a---b-0"),
            ("vsc-a--._b-0", "vsc-a--b-0"),
            ("vsc-a_.b-0", "vsc-a_b-0"),
            ("vsc-_a_-0", "vsc-a_0"),
            ("vsc-a.-0", "vsc-a.0"),
            ("vsc--0", "vsc--0"),
            ("vsc-...-0", "vsc-0"),
        ] {
            assert_eq!(valid_separators(name), want, "{name}");
        }
    }

    #[test]
    fn every_folder_name_gives_a_valid_image_name() {
        for folder in [
            "a_-b",
            "a-_b",
            "_x_",
            "x.",
            ".x",
            "..",
            "-",
            "_",
            "a__.b",
            "Ünïcode",
            "a b_-c",
            "x--",
        ] {
            let name = image_name(&Path::new("/w").join(folder));
            assert!(
                crate::oci::registry::parse_reference(&name).is_ok(),
                "{folder}: {name}"
            );
        }
    }
}
