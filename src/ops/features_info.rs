//! `features info manifest|tags|dependencies|verbose <feature>`: what the registry holds for a
//! published Feature, in the reference CLI's shapes (spec-note 0642). The operation returns
//! the data; the terminal renders it (`--output-format text|json`).

use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use crate::features::fetch::{FetchError, FetchFlags, Fetcher, PlanRequest};
use crate::features::reference::FeatureRef;
use crate::oci::registry::parse_reference;
use crate::ops::error::Result;
use crate::progress::Reporter;

/// What `features info` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoMode {
    /// The manifest and the canonical identifier.
    Manifest,
    /// The published tags.
    Tags,
    /// The dependency graph (`dependsOn`, `installsAfter`).
    Dependencies,
    /// All of the above.
    Verbose,
}

/// Inputs of [`features_info`].
#[derive(Debug, Clone)]
pub struct FeaturesInfoOptions {
    /// The mode.
    pub mode: InfoMode,
    /// The Feature's OCI reference.
    pub feature: String,
    /// Whether the dependency graph is wanted (the reference builds it for text output only).
    pub graph: bool,
    /// `--cache-dir`.
    pub cache_dir: Option<PathBuf>,
    /// The user's `[registries]` settings.
    pub registries: crate::settings::RegistrySettings,
}

/// One edge of the dependency graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEdge {
    /// Index of the Feature that depends, in [`FeatureInfo::graph`] nodes.
    pub from: usize,
    /// Index of the Feature it depends on.
    pub to: usize,
    /// `true` for `dependsOn` (hard), `false` for `installsAfter` (soft).
    pub hard: bool,
}

/// The dependency graph: the Features in install order, and their edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyGraph {
    /// Each Feature's reference as written.
    pub nodes: Vec<String>,
    /// Each Feature's ids: its `id`, then its `legacyIds`.
    pub aliases: Vec<Vec<String>>,
    /// The Features asked for (not only pulled in by `dependsOn`).
    pub roots: Vec<usize>,
    /// The edges.
    pub edges: Vec<GraphEdge>,
}

/// What [`features_info`] found.
#[derive(Debug, Clone, Default)]
pub struct FeatureInfo {
    /// `<registry>/<repository>` of the reference (no tag or digest).
    pub resource: String,
    /// The manifest as served (key order kept), for `manifest` and `verbose`.
    pub manifest: Option<Value>,
    /// `<registry>/<repository>@<manifest digest>`, with the manifest.
    pub canonical_id: Option<String>,
    /// The registry's tags, in its order, for `tags` and `verbose`.
    pub published_tags: Option<Vec<String>>,
    /// The dependency graph, for `dependencies` and `verbose` when asked for.
    pub graph: Option<DependencyGraph>,
}

/// Why `features info` found nothing to show (the reference's two messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoMiss {
    /// No manifest for the reference.
    Manifest,
    /// No tag in the repository.
    Tags,
}

/// Reads what `opts.mode` asks for. A missing manifest or an empty tag list is `Ok` with
/// [`InfoMiss`] and what was found before it, so the terminal can print the reference's
/// message; the error behind a missing manifest is returned with it.
///
/// Errors: [`OpsError::Fetch`](crate::ops::OpsError::Fetch) for an invalid reference or a
/// cache that cannot be opened; [`OpsError::Feature`](crate::ops::OpsError::Feature) when the
/// graph cannot be built.
pub async fn features_info(
    opts: &FeaturesInfoOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<(FeatureInfo, Option<(InfoMiss, Option<String>)>)> {
    let fetcher = Fetcher::for_operation(
        &opts.registries,
        FetchFlags {
            cache_dir: opts.cache_dir.clone(),
            ..Default::default()
        },
    )?
    .with_reporter(reporter);
    let oci = |source| FetchError::Oci {
        feature: opts.feature.clone(),
        source,
    };
    let reference = parse_reference(&opts.feature).map_err(oci)?;
    let mut info = FeatureInfo {
        resource: format!("{}/{}", reference.registry(), reference.repository()),
        ..FeatureInfo::default()
    };
    // Every mode starts with the manifest, as the reference's: no manifest, nothing to show.
    let (bytes, digest) = match fetcher.artifacts().manifest(&reference).await {
        Ok(found) => found,
        Err(e) => {
            let cause = format!("cannot fetch Feature `{}`: {e}", opts.feature);
            return Ok((info, Some((InfoMiss::Manifest, Some(cause)))));
        }
    };
    if matches!(opts.mode, InfoMode::Manifest | InfoMode::Verbose) {
        info.manifest = serde_json::from_slice(&bytes).ok();
        info.canonical_id = Some(format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ));
    }
    if matches!(opts.mode, InfoMode::Tags | InfoMode::Verbose) {
        let tags = fetcher
            .registry()
            .list_tags(&reference)
            .await
            .unwrap_or_default();
        if tags.is_empty() {
            return Ok((info, Some((InfoMiss::Tags, None))));
        }
        info.published_tags = Some(tags);
    }
    if opts.graph && matches!(opts.mode, InfoMode::Dependencies | InfoMode::Verbose) {
        info.graph = Some(graph(&fetcher, &opts.feature).await?);
    }
    Ok((info, None))
}

/// The dependency graph of one Feature: the install plan of `{"<feature>": {}}`.
async fn graph(fetcher: &Fetcher, feature: &str) -> Result<DependencyGraph> {
    let features: IndexMap<String, Value> =
        [(feature.to_owned(), Value::Object(Default::default()))]
            .into_iter()
            .collect();
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let plan = fetcher
        .plan(&PlanRequest {
            features: &features,
            override_order: &[],
            config_dir: &here,
            devcontainer_dir: &here.join(".devcontainer"),
            lockfile: None,
        })
        .await?;
    let features = &plan.install.features;
    let mut graph = DependencyGraph {
        nodes: features.iter().map(|f| f.key.clone()).collect(),
        aliases: features
            .iter()
            .map(|f| f.metadata.aliases().map(str::to_owned).collect())
            .collect(),
        roots: (0..features.len())
            .filter(|&i| features[i].from_user)
            .collect(),
        edges: Vec::new(),
    };
    for (from, f) in features.iter().enumerate() {
        for dep in &f.depends_on {
            let dep = FeatureRef::parse(dep).ok();
            if let Some(to) = features
                .iter()
                .position(|g| Some(&g.reference) == dep.as_ref())
            {
                graph.edges.push(GraphEdge {
                    from,
                    to,
                    hard: true,
                });
            }
        }
        for after in &f.metadata.installs_after {
            let resource = FeatureRef::parse(after).ok().map(|r| r.resource());
            for (to, g) in features.iter().enumerate() {
                if Some(g.reference.resource()) == resource && to != from {
                    graph.edges.push(GraphEdge {
                        from,
                        to,
                        hard: false,
                    });
                }
            }
        }
    }
    Ok(graph)
}
