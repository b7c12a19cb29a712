//! `devcell features info manifest|tags|dependencies|verbose <feature>`, rendered as the
//! reference CLI renders it (spec-note 0642).

use std::process::ExitCode;

use sha2::Digest;

use crate::cli::args::{FeaturesInfoArgs, FeaturesInfoMode, OutputFormat};
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::features_info::{
    DependencyGraph, FeatureInfo, FeaturesInfoOptions, InfoMiss, InfoMode, features_info,
};

/// Runs `features info`. Text: headed sections; JSON: one document (4-space indented, as the
/// reference). Nothing found: the reference's message (text) or `{}` (JSON), exit 1.
pub fn run(args: FeaturesInfoArgs) -> anyhow::Result<ExitCode> {
    let json = args.output_format == OutputFormat::Json;
    let opts = FeaturesInfoOptions {
        mode: match args.mode {
            FeaturesInfoMode::Manifest => InfoMode::Manifest,
            FeaturesInfoMode::Tags => InfoMode::Tags,
            FeaturesInfoMode::Dependencies => InfoMode::Dependencies,
            FeaturesInfoMode::Verbose => InfoMode::Verbose,
        },
        feature: args.feature.clone(),
        graph: !json,
        cache_dir: args.fetch.cache_dir,
        registries: crate::settings::load(args.fetch.config_file.as_deref())?.registries,
    };
    let (info, miss) = with_progress(|reporter| features_info(&opts, reporter))??;
    if json {
        render_json(&info, miss.is_some());
    } else {
        render_text(&info, &args.feature);
    }
    match miss {
        None => Ok(ExitCode::SUCCESS),
        Some((what, cause)) => {
            if !json {
                output::stdout_text(&match what {
                    InfoMiss::Manifest => {
                        "No manifest found! If this manifest requires authentication, please login."
                            .to_owned()
                    }
                    InfoMiss::Tags => format!(
                        "No published versions found for feature '{}'\n",
                        info.resource
                    ),
                });
            }
            if let Some(cause) = cause {
                output::stderr_line(&format!("error: {cause}"));
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

fn render_json(info: &FeatureInfo, missed: bool) {
    let mut out = serde_json::Map::new();
    if !missed {
        if let (Some(m), Some(id)) = (&info.manifest, &info.canonical_id) {
            out.insert("manifest".into(), m.clone());
            out.insert("canonicalId".into(), id.clone().into());
        }
        if let Some(tags) = &info.published_tags {
            out.insert("publishedTags".into(), tags.clone().into());
        }
    }
    if missed {
        output::json(&serde_json::Value::Object(out));
    } else {
        output::json_pretty(&serde_json::Value::Object(out), 4);
    }
}

fn render_text(info: &FeatureInfo, _feature: &str) {
    if let (Some(m), Some(id)) = (&info.manifest, &info.canonical_id) {
        output::heading_box("Manifest");
        output::json_pretty(m, 2);
        output::stdout_text("");
        output::heading_box("Canonical Identifier");
        output::stdout_text(&format!("{id}\n"));
    }
    if let Some(tags) = &info.published_tags {
        output::heading_box("Published Tags");
        output::stdout_text(&tags.join("\n   "));
    }
    if let Some(graph) = &info.graph {
        output::heading_box("Dependency Tree (Render with https://mermaid.live/)");
        output::stdout_text(&mermaid(graph));
    }
}

/// The graph as a Mermaid flowchart, in the reference's order: each Feature asked for
/// (`<id>[<reference><br/><0><br>aliases: <id>, <legacy ids>]`), then its edges depth first
/// (`-->` for `dependsOn`, `-.->` for `installsAfter`, each followed by the edges of the
/// Feature it points to). Node ids are the first six hex digits of the reference's sha256 (the
/// reference hashes its internal state; spec-note 0642).
fn mermaid(graph: &DependencyGraph) -> String {
    let id = |i: usize| {
        let digest = sha2::Sha256::digest(graph.nodes[i].as_bytes());
        hex::encode(digest)[..6].to_owned()
    };
    let node = |i: usize| {
        let aliases = graph.aliases.get(i).filter(|a| !a.is_empty());
        let aliases = aliases
            .map(|a| format!("<br>aliases: {}", a.join(", ")))
            .unwrap_or_default();
        format!("{}[{}<br/><0>{aliases}]", id(i), graph.nodes[i])
    };
    let mut out = String::from("flowchart\n");
    for &root in &graph.roots {
        out.push_str(&node(root));
        out.push('\n');
        let mut path = vec![root];
        edges_from(graph, root, &node, &mut path, &mut out);
    }
    out
}

/// The edges from `from` and, depth first, from each Feature they reach (`path` guards
/// against a cycle).
fn edges_from(
    graph: &DependencyGraph,
    from: usize,
    node: &dyn Fn(usize) -> String,
    path: &mut Vec<usize>,
    out: &mut String,
) {
    for hard in [true, false] {
        for e in graph
            .edges
            .iter()
            .filter(|e| e.from == from && e.hard == hard)
        {
            let arrow = if e.hard { "-->" } else { "-.->" };
            out.push_str(&format!("{} {arrow} {}\n", node(e.from), node(e.to)));
            if !path.contains(&e.to) {
                path.push(e.to);
                edges_from(graph, e.to, node, path, out);
                path.pop();
            }
        }
    }
}
