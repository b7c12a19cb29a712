//! The registry hosts local Features name through `dependsOn` (attack 23, N14): a local
//! Feature (`./name` under `.devcontainer`) is workspace content, so its
//! `devcontainer-feature.json` is as much the agent's to edit as devcontainer.json, and each
//! `dependsOn` key is a Feature the resolver fetches. The registry judgement
//! ([`crate::ops::permissions::registry_requests`], spec-note 0481) weighs these references
//! as it weighs devcontainer.json's own `features`, with the committed versions of the same
//! files as their committed side.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::features::FeatureRef;
use crate::features::metadata::{FEATURE_FILE, FeatureMetadata, read_feature_file};
use crate::ops::load::LoadedConfiguration;
use crate::security::Source;
use crate::security::registries::{Named, feature_host, named_by_every};

/// The most local Feature folders [`local_dependencies`] reads: a bound on a graph the
/// repository writes (the resolver itself refuses cycles).
const MAX_LOCAL_FEATURES: usize = 256;

/// What the local Features of a configuration name to fetch.
#[derive(Debug, Default)]
pub(crate) struct LocalDependencies {
    /// Every OCI or tarball reference a local Feature's `dependsOn` names, with its host, the
    /// source being that Feature (by `id`).
    pub(crate) named: Vec<Named>,
    /// The `devcontainer-feature.json` files read (each local Feature reached from
    /// devcontainer.json's `features` through local `dependsOn`), for the committed side.
    files: Vec<PathBuf>,
}

/// The registry references the local Features of `loaded` name in `dependsOn`, following
/// local `dependsOn` transitively (each folder once, at most [`MAX_LOCAL_FEATURES`]). The
/// metadata is read and parsed as the resolver reads it ([`read_feature_file`]: no link
/// followed; [`FeatureMetadata::parse`]); a folder that does not resolve inside
/// `.devcontainer` or a file that does not read or parse is skipped here: the resolver refuses
/// it before it fetches anything.
pub(crate) fn local_dependencies(loaded: &LoadedConfiguration) -> LocalDependencies {
    let parts = crate::ops::entries::FeatureRequestParts::of(loaded);
    let mut queue: Vec<FeatureRef> = parts
        .features
        .keys()
        .filter_map(|key| FeatureRef::parse(key).ok())
        .filter(FeatureRef::is_local)
        .collect();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut out = LocalDependencies::default();
    while let Some(reference) = queue.pop() {
        let Ok(dir) = reference.local_dir(&parts.config_dir, &parts.devcontainer_dir) else {
            continue;
        };
        if seen.len() >= MAX_LOCAL_FEATURES || !seen.insert(dir.clone()) {
            continue;
        }
        let file = dir.join(FEATURE_FILE);
        let Some(metadata) = read_feature_file(&dir)
            .ok()
            .and_then(|text| FeatureMetadata::parse(&text, &file).ok())
        else {
            continue;
        };
        out.files.push(file);
        for key in metadata.depends_on.keys() {
            match FeatureRef::parse(key) {
                Ok(dependency) if dependency.is_local() => queue.push(dependency),
                _ => out.named.extend(feature_host(key).map(|host| Named {
                    host,
                    reference: key.clone(),
                    source: Source::Feature(metadata.id.clone()),
                })),
            }
        }
    }
    out
}

impl LocalDependencies {
    /// The committed side: the hosts every committed version of each file read names in its
    /// `dependsOn`, the versions of a (resolved) file being what `committed` reads: `HEAD`'s
    /// and the user's commit before a fetch-back
    /// ([`crate::security::registries::committed_texts`]), or, for a clone task,
    /// the user's repository at the task's base, never the clone (attack 25, P6). A file git
    /// does not track names none.
    pub(crate) fn committed_hosts(
        &self,
        committed: impl Fn(&Path) -> Vec<Option<String>>,
    ) -> BTreeSet<String> {
        let resolved =
            |p: &Path| crate::security::host_path::resolve(p).unwrap_or_else(|_| p.to_path_buf());
        self.files
            .iter()
            .flat_map(|file| {
                let versions = committed(&resolved(file));
                named_by_every(&versions, |_, text| dependency_hosts(text, file))
            })
            .collect()
    }
}

/// The registry hosts a `devcontainer-feature.json` text names in `dependsOn` (local ones
/// name none); none when it does not parse.
fn dependency_hosts(text: &str, file: &Path) -> BTreeSet<String> {
    FeatureMetadata::parse(text, file)
        .map(|m| {
            m.depends_on
                .keys()
                .filter_map(|k| feature_host(k))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::registries::committed_texts;

    fn feature(root: &Path, name: &str, depends_on: &str) {
        let dir = root.join(".devcontainer").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(FEATURE_FILE),
            format!(r#"{{"id":"{name}","version":"1.0.0","dependsOn":{depends_on}}}"#),
        )
        .unwrap();
    }

    /// Attack 23, N14: a local Feature's `dependsOn` names registry references, and a local
    /// `dependsOn` is followed to the Feature it names (a cycle read once); each reference
    /// is named by the Feature whose file names it.
    #[test]
    fn a_local_features_depends_on_names_its_registries_transitively() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        feature(
            root,
            "a",
            r#"{"127.0.0.1:18999/exfil/f:secret":{},"./b":{}}"#,
        );
        feature(
            root,
            "b",
            r#"{"https://u@Tar.example.test/devcontainer-feature-x.tgz":{},"./a":{}}"#,
        );
        std::fs::write(
            root.join(".devcontainer/devcontainer.json"),
            r#"{"image":"busybox","features":{"./a":{}}}"#,
        )
        .unwrap();
        let target = crate::ops::options::TargetOptions {
            workspace_folder: root.to_path_buf(),
            ..Default::default()
        };
        let loaded = crate::ops::target::load_for(&target, None).unwrap();
        let found = local_dependencies(&loaded);
        let named: Vec<(String, Source)> = found
            .named
            .iter()
            .map(|n| (n.host.clone(), n.source.clone()))
            .collect();
        assert_eq!(
            named,
            [
                ("127.0.0.1:18999".into(), Source::Feature("a".into())),
                ("tar.example.test".into(), Source::Feature("b".into())),
            ]
        );
        assert_eq!(found.files.len(), 2);
        // no repository: no committed side
        assert!(
            found
                .committed_hosts(|p| committed_texts(p, root))
                .is_empty()
        );
    }
}
