//! The spec's round-based Feature installation order (spec-distilled §4.6, §4.7; spec
//! feature-dependencies.md; spec-note 0043).
//!
//! Pure: metadata comes from a resolver callback (local folder read, OCI manifest annotation or
//! blob, tarball), called at most once per distinct reference. Steps:
//!
//! 1. build the graph from the user's Features: each `dependsOn` entry becomes a node (hard
//!    edge, recursive; pulls in unlisted Features); a node equal to an existing one (§4.7) is
//!    merged into it; `installsAfter` entries become soft edges (never add a Feature);
//! 2. `overrideFeatureInstallOrder` entry `i` of `n` gives matching nodes priority `n - i`,
//!    and each node's predecessors at least its priority (spec-note 0450);
//! 3. soft edges that match no node are dropped;
//! 4. rounds: the nodes whose hard and soft predecessors are all installed, restricted to the
//!    highest priority among them, sorted by the round stable sort, are appended. An empty
//!    round is a cycle, reported with every Feature in it.
//!
//! Async callers (registry fetches) can pre-fetch: starting from the user's references, fetch
//! each one, queue [`dependency_refs`] of its metadata, repeat until nothing new appears, then
//! call [`order`] with a resolver that looks the results up in that map.

use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};

use indexmap::IndexMap;
use serde_json::Value;

use super::error::{FeatureError, Result};
use super::metadata::FeatureMetadata;
use super::options::{ResolvedOptions, resolve_options, user_options};
use super::reference::{FeatureRef, OciVersion};
use crate::diagnostics::Warning;

/// At most this many graph nodes (guards against runaway `dependsOn` chains).
pub const MAX_FEATURES: usize = 512;

/// What a resolver knows about one Feature reference.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedFeature {
    /// The Feature's `devcontainer-feature.json`.
    pub metadata: FeatureMetadata,
    /// The canonical identity: the OCI manifest digest (`sha256:…`) or the tarball's sha256;
    /// `None` for local Features (and for OCI references not yet resolved to a digest, which
    /// then compare by their reference as written).
    pub canonical: Option<String>,
}

/// One Feature in install order.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFeature {
    /// The reference as written (the `features` key, or the `dependsOn` key that pulled it in).
    pub key: String,
    /// The parsed reference.
    pub reference: FeatureRef,
    /// The value as written in `features` / `dependsOn` (`true`, a string or an object).
    pub value: Value,
    /// The user options after the string shorthand was expanded (no defaults).
    pub user_options: IndexMap<String, Value>,
    /// Effective options (validated, defaults filled), as they reach `install.sh`.
    pub options: ResolvedOptions,
    /// The Feature's metadata.
    pub metadata: FeatureMetadata,
    /// See [`ResolvedFeature::canonical`].
    pub canonical: Option<String>,
    /// True when listed in devcontainer.json `features` (false when only pulled in by `dependsOn`).
    pub from_user: bool,
    /// The `dependsOn` keys of this Feature, as written.
    pub depends_on: Vec<String>,
}

/// The result of [`order`]: Features in install order plus non-fatal findings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InstallPlan {
    /// Features in install order.
    pub features: Vec<PlannedFeature>,
    /// Unknown options, unmatched override entries, deprecated Features, ….
    pub warnings: Vec<Warning>,
}

impl InstallPlan {
    /// The `devcontainer features resolve-dependencies` shape:
    /// `{"installOrder": [{"id": …, "options": <value as written>}]}` where `id` is
    /// `<registry>/<repository>@<manifest digest>` for OCI Features with a known digest (as the
    /// reference CLI prints) and the reference as written otherwise.
    pub fn to_install_order_json(&self) -> Value {
        let order: Vec<Value> = self
            .features
            .iter()
            .map(|f| {
                let id = match (&f.reference, &f.canonical) {
                    (FeatureRef::Oci { .. }, Some(digest)) => {
                        format!("{}@{digest}", f.reference.resource())
                    }
                    _ => f.key.clone(),
                };
                serde_json::json!({"id": id, "options": f.value})
            })
            .collect();
        serde_json::json!({ "installOrder": order })
    }
}

/// The references a Feature pulls in through `dependsOn`, parsed (for pre-fetching).
///
/// Errors: [`FeatureError::InvalidReference`] for a `dependsOn` key that is not a reference.
pub fn dependency_refs(metadata: &FeatureMetadata) -> Result<Vec<FeatureRef>> {
    metadata
        .depends_on
        .keys()
        .map(|k| FeatureRef::parse(k))
        .collect()
}

struct Node {
    planned: PlannedFeature,
    hard: Vec<usize>,
    soft_raw: Vec<String>,
    soft: Vec<Vec<usize>>,
    priority: usize,
    seq: usize,
}

/// Orders the Features of a configuration.
///
/// `features` is devcontainer.json `features` (key → value, in file order);
/// `override_order` is `overrideFeatureInstallOrder`; `resolve` returns the metadata of one
/// reference (it is called once per distinct reference).
///
/// Errors: invalid references or options ([`FeatureError::InvalidReference`],
/// [`FeatureError::InvalidOption`], [`FeatureError::InvalidValue`]), invalid override entries
/// ([`FeatureError::InvalidOverride`]), resolver errors as returned, and
/// [`FeatureError::Cycle`] naming every Feature of a cycle.
pub fn order(
    features: &IndexMap<String, Value>,
    override_order: &[String],
    resolve: &mut dyn FnMut(&FeatureRef) -> Result<ResolvedFeature>,
) -> Result<InstallPlan> {
    let mut warnings = Vec::new();
    let mut nodes = dependency_graph(features, resolve, &mut warnings)?;
    resolve_soft_edges(&mut nodes);
    apply_override_order(&mut nodes, override_order, &mut warnings)?;
    propagate_priority(&mut nodes);
    let result = install_rounds(&nodes)?;
    let mut slots: Vec<Option<PlannedFeature>> =
        nodes.into_iter().map(|n| Some(n.planned)).collect();
    let features = result
        .into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect();
    Ok(InstallPlan { features, warnings })
}

/// Every Feature of the configuration and, breadth first, each one its `dependsOn` pulls in,
/// as nodes with their hard edges: an equal Feature (same reference and options) is one node,
/// `resolve` is called once per distinct reference, and at most [`MAX_FEATURES`] are taken.
///
/// Errors: as [`order`] (all but [`FeatureError::Cycle`] and the override's).
fn dependency_graph(
    features: &IndexMap<String, Value>,
    resolve: &mut dyn FnMut(&FeatureRef) -> Result<ResolvedFeature>,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Node>> {
    let mut memo: HashMap<FeatureRef, ResolvedFeature> = HashMap::new();
    let mut nodes: Vec<Node> = Vec::new();
    // (key, value, parent node, from_user)
    let mut worklist: VecDeque<(String, Value, Option<usize>, bool)> = features
        .iter()
        .map(|(k, v)| (k.clone(), v.clone(), None, true))
        .collect();

    while let Some((key, value, parent, from_user)) = worklist.pop_front() {
        let reference = FeatureRef::parse(&key)?;
        let resolved = match memo.get(&reference) {
            Some(r) => r.clone(),
            None => {
                let r = resolve(&reference)?;
                memo.insert(reference.clone(), r.clone());
                r
            }
        };
        let (candidate, option_warnings) =
            planned_feature(key, value, reference, resolved, from_user, warnings)?;
        let index = match nodes.iter().position(|n| equal(&n.planned, &candidate)) {
            Some(existing) => {
                if from_user {
                    nodes[existing].planned.from_user = true;
                }
                existing
            }
            None => {
                if nodes.len() >= MAX_FEATURES {
                    return Err(FeatureError::Resolve {
                        feature: candidate.key,
                        source: format!(
                            "more than {MAX_FEATURES} Features in the dependency graph"
                        )
                        .into(),
                    });
                }
                warnings.extend(option_warnings);
                warnings.extend(reference_warnings(&candidate));
                for (dep_key, dep_value) in &candidate.metadata.depends_on {
                    worklist.push_back((
                        dep_key.clone(),
                        dep_value.clone(),
                        Some(nodes.len()),
                        false,
                    ));
                }
                let soft_raw = candidate.metadata.installs_after.clone();
                let seq = nodes.len();
                nodes.push(Node {
                    planned: candidate,
                    hard: Vec::new(),
                    soft_raw,
                    soft: Vec::new(),
                    priority: 0,
                    seq,
                });
                seq
            }
        };
        if let Some(p) = parent
            && !nodes[p].hard.contains(&index)
        {
            nodes[p].hard.push(index);
        }
    }
    Ok(nodes)
}

/// One Feature as written (`key`: `value`) with its options resolved against its metadata,
/// and the options' warnings, which count only if it becomes a node of its own. The user's
/// own warnings go to `warnings` at once.
///
/// Errors: [`FeatureError::InvalidOption`], [`FeatureError::InvalidValue`].
fn planned_feature(
    key: String,
    value: Value,
    reference: FeatureRef,
    resolved: ResolvedFeature,
    from_user: bool,
    warnings: &mut Vec<Warning>,
) -> Result<(PlannedFeature, Vec<Warning>)> {
    let mut user = user_options(&key, &value, warnings)?;
    if matches!(value, Value::String(_) | Value::Number(_))
        && !resolved.metadata.options.contains_key("version")
    {
        // The reference CLI ignores the shorthand when there is no `version` option
        // (spec-note 0041); the install environment stays identical.
        warnings.push(Warning {
            location: None,
            message: format!(
                "Feature `{key}` has no `version` option; the value `{value}` is ignored (write an options object)"
            ),
        });
        user.clear();
    }
    let mut option_warnings = Vec::new();
    let options = resolve_options(&key, &resolved.metadata, &user, &mut option_warnings)?;
    let candidate = PlannedFeature {
        key,
        reference,
        value,
        user_options: user,
        options,
        depends_on: resolved.metadata.depends_on.keys().cloned().collect(),
        metadata: resolved.metadata,
        canonical: resolved.canonical,
        from_user,
    };
    Ok((candidate, option_warnings))
}

/// What the user should know of a Feature's reference: renamed (a legacy id), redirected
/// (`devcontainers-contrib`) or deprecated.
fn reference_warnings(candidate: &PlannedFeature) -> Vec<Warning> {
    let key = &candidate.key;
    let mut warnings = Vec::new();
    if let Some(ref_id) = candidate.reference.id()
        && ref_id != candidate.metadata.id
        && candidate.metadata.legacy_ids.contains(&ref_id)
    {
        warnings.push(Warning {
            location: None,
            message: format!(
                "Feature `{key}` was renamed from `{ref_id}` to `{}`; update the reference",
                candidate.metadata.id
            ),
        });
    }
    if candidate.reference.is_redirected() {
        warnings.push(Warning {
            location: None,
            message: format!(
                "Feature `{key}`: `devcontainers-contrib` is redirected to `{}`",
                candidate.reference.resource()
            ),
        });
    }
    if candidate.metadata.deprecated == Some(true) {
        warnings.push(Warning {
            location: None,
            message: format!("Feature `{key}` is deprecated"),
        });
    }
    warnings
}

/// Soft edges: each `installsAfter` entry resolved to the nodes it matches; the rest dropped.
fn resolve_soft_edges(nodes: &mut [Node]) {
    for i in 0..nodes.len() {
        let raw = std::mem::take(&mut nodes[i].soft_raw);
        let mut soft = Vec::new();
        for entry in &raw {
            let matcher = Matcher::new(entry, Some(&nodes[i].planned.reference));
            let matched: Vec<usize> = (0..nodes.len())
                .filter(|&j| j != i && matcher.matches(&nodes[j].planned))
                .collect();
            if !matched.is_empty() {
                soft.push(matched);
            }
        }
        nodes[i].soft = soft;
    }
}

/// `overrideFeatureInstallOrder`: an earlier entry gives the Features it matches a higher
/// priority; an entry with a version or matching nothing is a warning.
///
/// Errors: [`FeatureError::InvalidOverride`] for an empty entry.
fn apply_override_order(
    nodes: &mut [Node],
    override_order: &[String],
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    let n = override_order.len();
    for (idx, entry) in override_order.iter().enumerate() {
        if let Ok(r) = FeatureRef::parse(entry)
            && let FeatureRef::Oci { raw, .. } = &r
            && has_explicit_version(raw)
        {
            warnings.push(Warning {
                location: None,
                message: format!(
                    "`overrideFeatureInstallOrder` entry `{entry}` names a version; versions are ignored there"
                ),
            });
        }
        if entry.trim().is_empty() {
            return Err(FeatureError::InvalidOverride {
                entry: entry.clone(),
                message: "the entry is empty".into(),
            });
        }
        let matcher = Matcher::new(entry, None);
        let mut any = false;
        for node in nodes.iter_mut() {
            if matcher.matches(&node.planned) {
                node.priority = node.priority.max(n - idx);
                any = true;
            }
        }
        if !any {
            warnings.push(Warning {
                location: None,
                message: format!(
                    "`overrideFeatureInstallOrder` entry `{entry}` matches no Feature of this configuration"
                ),
            });
        }
    }
    Ok(())
}

/// The install order, in rounds: each round takes the ready nodes (every hard and soft
/// predecessor installed) of the highest priority, in [`compare`] order.
///
/// Errors: [`FeatureError::Cycle`] when nothing is ready.
fn install_rounds(nodes: &[Node]) -> Result<Vec<usize>> {
    let mut installed = vec![false; nodes.len()];
    let mut remaining: Vec<usize> = (0..nodes.len()).collect();
    let mut result = Vec::with_capacity(nodes.len());
    while !remaining.is_empty() {
        let ready = |i: usize| {
            nodes[i].hard.iter().all(|&d| installed[d])
                && nodes[i]
                    .soft
                    .iter()
                    .all(|m| m.iter().all(|&d| installed[d]))
        };
        let mut round: Vec<usize> = remaining.iter().copied().filter(|&i| ready(i)).collect();
        if round.is_empty() {
            return Err(cycle_error(nodes, &remaining, &installed));
        }
        let max = round.iter().map(|&i| nodes[i].priority).max().unwrap_or(0);
        round.retain(|&i| nodes[i].priority == max);
        round.sort_by(|&a, &b| compare(&nodes[a], &nodes[b]));
        for &i in &round {
            installed[i] = true;
        }
        remaining.retain(|i| !installed[*i]);
        result.extend(round);
    }
    Ok(result)
}

/// Gives every Feature a dependent needs (hard `dependsOn` and matched `installsAfter`
/// predecessors, transitively) at least that dependent's override priority, so an
/// override-listed Feature installs in its listed place with its dependencies just before it
/// instead of after every lower-priority Feature (devcontainers/cli#1200; spec-note 0450).
/// Relaxation to a fixed point: bounded by the node count, cycles included (their error comes
/// from the rounds).
fn propagate_priority(nodes: &mut [Node]) {
    for _ in 0..nodes.len() {
        let mut changed = false;
        for i in 0..nodes.len() {
            let p = nodes[i].priority;
            if p == 0 {
                continue;
            }
            let preds: Vec<usize> = nodes[i]
                .hard
                .iter()
                .copied()
                .chain(nodes[i].soft.iter().flatten().copied())
                .collect();
            for d in preds {
                if nodes[d].priority < p {
                    nodes[d].priority = p;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
}

/// Feature equality (spec-distilled §4.7; spec-note 0043): same kind, same identity (OCI and
/// tarball: canonical digest when known, else the reference as written; local: the
/// normalized path) and equal effective options.
fn equal(a: &PlannedFeature, b: &PlannedFeature) -> bool {
    let identity = |f: &PlannedFeature| match &f.reference {
        FeatureRef::Local { .. } => f.reference.resource(),
        _ => f
            .canonical
            .clone()
            .unwrap_or_else(|| f.reference.lock_key()),
    };
    std::mem::discriminant(&a.reference) == std::mem::discriminant(&b.reference)
        && identity(a) == identity(b)
        && a.options == b.options
}

fn has_explicit_version(raw: &str) -> bool {
    raw.contains('@')
        || raw
            .rfind(':')
            .is_some_and(|c| c > raw.rfind('/').unwrap_or(0))
}

/// Matches an `installsAfter` / `overrideFeatureInstallOrder` entry against nodes by resource,
/// ignoring version, options and digest; `legacyIds` count as aliases in the same namespace.
struct Matcher {
    kind: MatchKind,
}

enum MatchKind {
    /// `registry/namespace` and the id.
    Oci { prefix: String, id: String },
    /// A normalized local path.
    Local(String),
    /// A tarball URL.
    Url(String),
    /// A bare id: matches local/tarball Features with that id or legacy id, and OCI Features
    /// in the declaring Feature's namespace (any namespace when there is no declaring Feature).
    Bare { id: String, prefix: Option<String> },
}

impl Matcher {
    fn new(entry: &str, declaring: Option<&FeatureRef>) -> Matcher {
        let kind = match FeatureRef::parse(entry) {
            Ok(FeatureRef::Oci {
                registry,
                repository,
                id,
                ..
            }) => {
                let ns = repository.rsplit_once('/').map_or("", |(ns, _)| ns);
                MatchKind::Oci {
                    prefix: format!("{registry}/{ns}"),
                    id,
                }
            }
            Ok(r @ FeatureRef::Local { .. }) => MatchKind::Local(r.resource()),
            Ok(FeatureRef::Tarball { url, .. }) => MatchKind::Url(url),
            Err(_) => MatchKind::Bare {
                id: entry.trim().to_ascii_lowercase(),
                prefix: declaring.and_then(oci_prefix),
            },
        };
        Matcher { kind }
    }

    fn matches(&self, node: &PlannedFeature) -> bool {
        let has_alias = |id: &str| node.metadata.aliases().any(|a| a.eq_ignore_ascii_case(id));
        match (&self.kind, &node.reference) {
            (MatchKind::Oci { prefix, id }, FeatureRef::Oci { id: node_id, .. }) => {
                oci_prefix(&node.reference).as_deref() == Some(prefix.as_str())
                    && (node_id == id || has_alias(id))
            }
            (MatchKind::Local(path), FeatureRef::Local { .. }) => {
                node.reference.resource() == *path
            }
            (MatchKind::Url(url), FeatureRef::Tarball { url: u, .. }) => {
                u.eq_ignore_ascii_case(url)
            }
            (MatchKind::Bare { id, prefix }, r) => {
                let id_matches = r.id().as_deref() == Some(id.as_str()) || has_alias(id);
                match (r, prefix) {
                    (FeatureRef::Oci { .. }, Some(p)) => {
                        id_matches && oci_prefix(r).as_deref() == Some(p.as_str())
                    }
                    _ => id_matches,
                }
            }
            _ => false,
        }
    }
}

fn oci_prefix(r: &FeatureRef) -> Option<String> {
    match r {
        FeatureRef::Oci { registry, .. } => {
            Some(format!("{registry}/{}", r.namespace().unwrap_or("")))
        }
        _ => None,
    }
}

/// The round stable sort (spec-note 0043): resource name; tag oldest → newest (`latest`
/// newest; numeric segments compared as numbers); fewer user-defined options first, then
/// option keys, then option values; canonical digest; first seen first.
fn compare(a: &Node, b: &Node) -> Ordering {
    let (fa, fb) = (&a.planned, &b.planned);
    collate(&fa.reference.resource(), &fb.reference.resource())
        .then_with(|| compare_versions(&fa.reference, &fb.reference))
        .then_with(|| fa.user_options.len().cmp(&fb.user_options.len()))
        .then_with(|| {
            let mut ka: Vec<&String> = fa.user_options.keys().collect();
            let mut kb: Vec<&String> = fb.user_options.keys().collect();
            ka.sort();
            kb.sort();
            ka.cmp(&kb)
        })
        .then_with(|| {
            let values = |f: &PlannedFeature| {
                let mut kv: Vec<(&String, String)> = f
                    .user_options
                    .iter()
                    .map(|(k, v)| (k, v.to_string()))
                    .collect();
                kv.sort();
                kv.into_iter().map(|(_, v)| v).collect::<Vec<_>>()
            };
            values(fa).cmp(&values(fb))
        })
        .then_with(|| fa.canonical.cmp(&fb.canonical))
        .then_with(|| a.seq.cmp(&b.seq))
}

/// ASCII punctuation and symbols in the order of the Unicode (CLDR root) collation that the
/// reference CLI's `localeCompare` uses; digits and letters follow.
const PUNCTUATION_ORDER: &str = "\t\n\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

/// Compares resource names like the reference CLI's `localeCompare` (CLDR root collation) for
/// ASCII: punctuation (in collation order) < digits < letters; letters case-insensitive first,
/// lowercase before uppercase on a tie; other characters after letters by code point; finally
/// byte order, so the result is total.
fn collate(a: &str, b: &str) -> Ordering {
    fn primary(c: char) -> (u8, u32) {
        if let Some(i) = PUNCTUATION_ORDER.find(c) {
            (0, i as u32)
        } else if c.is_ascii_digit() {
            (1, c as u32)
        } else if c.is_ascii_alphabetic() {
            (2, c.to_ascii_lowercase() as u32)
        } else {
            (3, c as u32)
        }
    }
    a.chars()
        .map(primary)
        .cmp(b.chars().map(primary))
        .then_with(|| {
            // Tertiary: lowercase before uppercase.
            let case = |s: &str| {
                s.chars()
                    .map(|c| c.is_ascii_uppercase())
                    .collect::<Vec<_>>()
            };
            case(a).cmp(&case(b))
        })
        .then_with(|| a.cmp(b))
}

fn compare_versions(a: &FeatureRef, b: &FeatureRef) -> Ordering {
    match (a, b) {
        (FeatureRef::Oci { version: va, .. }, FeatureRef::Oci { version: vb, .. }) => {
            match (va, vb) {
                (OciVersion::Tag(x), OciVersion::Tag(y)) => compare_tags(x, y),
                (OciVersion::Tag(_), OciVersion::Digest(_)) => Ordering::Less,
                (OciVersion::Digest(_), OciVersion::Tag(_)) => Ordering::Greater,
                (OciVersion::Digest(x), OciVersion::Digest(y)) => x.cmp(y),
            }
        }
        _ => Ordering::Equal,
    }
}

/// `1` < `1.2` < `1.10` < `2` < `latest`; non-numeric segments compare as strings after numbers.
fn compare_tags(a: &str, b: &str) -> Ordering {
    match (a == "latest", b == "latest") {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let mut sa = a.split(['.', '-']);
    let mut sb = b.split(['.', '-']);
    loop {
        match (sa.next(), sb.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let ord = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    (Err(_), Err(_)) => x.cmp(y),
                };
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

/// Follows unsatisfied edges from a blocked node until one repeats; every blocked node has an
/// unsatisfied predecessor that is itself blocked, so this always finds a cycle.
fn cycle_error(nodes: &[Node], remaining: &[usize], installed: &[bool]) -> FeatureError {
    let next = |i: usize| -> Option<usize> {
        nodes[i]
            .hard
            .iter()
            .copied()
            .chain(nodes[i].soft.iter().flatten().copied())
            .find(|&d| !installed[d])
    };
    let mut path: Vec<usize> = Vec::new();
    let mut current = remaining.first().copied();
    while let Some(i) = current {
        if let Some(pos) = path.iter().position(|&p| p == i) {
            let mut cycle: Vec<String> = path[pos..]
                .iter()
                .map(|&p| nodes[p].planned.key.clone())
                .collect();
            cycle.push(nodes[i].planned.key.clone());
            return FeatureError::Cycle { cycle };
        }
        path.push(i);
        current = next(i);
    }
    FeatureError::Cycle {
        cycle: remaining
            .iter()
            .map(|&i| nodes[i].planned.key.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    /// A registry of fake Features: reference resource (or local path) → (metadata json, digest).
    struct Catalog(HashMap<String, (Value, Option<String>)>);

    impl Catalog {
        fn new(entries: &[(&str, Value)]) -> Catalog {
            Catalog(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let digest = if k.starts_with("./") {
                            None
                        } else {
                            Some(format!("sha256:{}", sha(k)))
                        };
                        (k.to_string(), (v.clone(), digest))
                    })
                    .collect(),
            )
        }

        fn resolver(&self) -> impl FnMut(&FeatureRef) -> Result<ResolvedFeature> + '_ {
            move |r: &FeatureRef| {
                // Tags resolve to the same digest unless the catalog has a tag-specific entry.
                let key = match r {
                    FeatureRef::Oci { raw, .. } if self.0.contains_key(raw) => raw.clone(),
                    _ => r.resource(),
                };
                let (meta, digest) = self.0.get(&key).ok_or_else(|| FeatureError::Resolve {
                    feature: r.to_string(),
                    source: "not in catalog".into(),
                })?;
                Ok(ResolvedFeature {
                    metadata: FeatureMetadata::parse(&meta.to_string(), Path::new("t.json"))
                        .unwrap(),
                    canonical: digest.clone(),
                })
            }
        }

        fn order(&self, features: Value, over: &[&str]) -> Result<InstallPlan> {
            let map: IndexMap<String, Value> = serde_json::from_value(features).unwrap();
            let over: Vec<String> = over.iter().map(|s| s.to_string()).collect();
            order(&map, &over, &mut self.resolver())
        }

        fn keys(&self, features: Value, over: &[&str]) -> Vec<String> {
            self.order(features, over)
                .unwrap()
                .features
                .into_iter()
                .map(|f| f.key)
                .collect()
        }
    }

    fn sha(s: &str) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(s.as_bytes()))
    }

    fn f(id: &str) -> Value {
        json!({"id": id, "version": "1.0.0", "options": {"o": {"type": "string", "default": "d"}}})
    }

    const R: &str = "ghcr.io/o/r";

    fn r(id: &str) -> String {
        format!("{R}/{id}")
    }

    #[test]
    fn independent_features_sort_by_resource() {
        // checklist 37
        let c = Catalog::new(&[(&r("b"), f("b")), (&r("a"), f("a")), (&r("c"), f("c"))]);
        let got = c.keys(json!({r("c"): {}, r("a"): {}, r("b"): {}}), &[]);
        assert_eq!(got, [r("a"), r("b"), r("c")]);
    }

    #[test]
    fn depends_on_pulls_in_unlisted_feature_first() {
        // checklist 38
        let mut a = f("a");
        a["dependsOn"] = json!({r("z"): {"o": "x"}});
        let c = Catalog::new(&[(&r("a"), a), (&r("z"), f("z"))]);
        let plan = c.order(json!({r("a"): {}}), &[]).unwrap();
        let keys: Vec<_> = plan.features.iter().map(|f| f.key.clone()).collect();
        assert_eq!(keys, [r("z"), r("a")]);
        assert!(!plan.features[0].from_user);
        assert_eq!(plan.features[0].options["o"].as_env(), "x");
    }

    #[test]
    fn depends_on_is_transitive() {
        // checklist 39
        let mut a = f("a");
        a["dependsOn"] = json!({r("b"): {}});
        let mut b = f("b");
        b["dependsOn"] = json!({r("c"): {}});
        let c = Catalog::new(&[(&r("a"), a), (&r("b"), b), (&r("c"), f("c"))]);
        assert_eq!(c.keys(json!({r("a"): {}}), &[]), [r("c"), r("b"), r("a")]);
    }

    #[test]
    fn depends_on_cycle_names_every_feature() {
        // checklist 40
        let mut a = f("a");
        a["dependsOn"] = json!({r("b"): {}});
        let mut b = f("b");
        b["dependsOn"] = json!({r("c"): {}});
        let mut cc = f("c");
        cc["dependsOn"] = json!({r("a"): {}});
        let c = Catalog::new(&[(&r("a"), a), (&r("b"), b), (&r("c"), cc), (&r("x"), f("x"))]);
        let e = c.order(json!({r("x"): {}, r("a"): {}}), &[]).unwrap_err();
        let FeatureError::Cycle { cycle } = &e else {
            panic!("{e}")
        };
        assert_eq!(cycle.len(), 4, "{cycle:?}");
        for id in ["a", "b", "c"] {
            assert!(cycle.contains(&r(id)), "{cycle:?}");
        }
        assert!(!cycle.contains(&r("x")));
        assert_eq!(cycle.first(), cycle.last());
        assert!(e.to_string().starts_with("circular Feature dependency: "));
    }

    #[test]
    fn self_dependency_is_a_cycle() {
        let mut a = f("a");
        a["dependsOn"] = json!({r("a"): {}});
        let c = Catalog::new(&[(&r("a"), a)]);
        let e = c.order(json!({r("a"): {}}), &[]).unwrap_err();
        assert!(
            matches!(e, FeatureError::Cycle { ref cycle } if cycle == &[r("a"), r("a")]),
            "{e}"
        );
    }

    #[test]
    fn installs_after_unqueued_does_not_install() {
        // checklist 41
        let mut a = f("a");
        a["installsAfter"] = json!([r("x")]);
        let c = Catalog::new(&[(&r("a"), a), (&r("x"), f("x"))]);
        assert_eq!(c.keys(json!({r("a"): {}}), &[]), [r("a")]);
    }

    #[test]
    fn installs_after_queued_goes_first() {
        // checklist 42, 44 (version ignored)
        let mut a = f("a");
        a["installsAfter"] = json!([r("x")]);
        let c = Catalog::new(&[(&r("a"), a), (&r("x"), f("x"))]);
        assert_eq!(
            c.keys(json!({r("a"): {}, format!("{}:1", r("x")): {}}), &[]),
            [format!("{}:1", r("x")), r("a")]
        );
    }

    #[test]
    fn installs_after_cycle_is_an_error() {
        // checklist 43
        let mut a = f("a");
        a["installsAfter"] = json!([r("b")]);
        let mut b = f("b");
        b["installsAfter"] = json!([r("a")]);
        let c = Catalog::new(&[(&r("a"), a), (&r("b"), b)]);
        let e = c.order(json!({r("a"): {}, r("b"): {}}), &[]).unwrap_err();
        let FeatureError::Cycle { cycle } = e else {
            panic!()
        };
        assert_eq!(cycle.len(), 3);
        assert!(cycle.contains(&r("a")) && cycle.contains(&r("b")));
    }

    #[test]
    fn installs_after_matches_legacy_ids() {
        // checklist 45
        let mut a = f("a");
        a["installsAfter"] = json!([r("old-name")]);
        let mut renamed = f("new-name");
        renamed["legacyIds"] = json!(["old-name"]);
        let c = Catalog::new(&[(&r("a"), a), (&r("new-name"), renamed)]);
        assert_eq!(
            c.keys(json!({r("a"): {}, r("new-name"): {}}), &[]),
            [r("new-name"), r("a")]
        );
        // A legacy id in another namespace does not match.
        let mut a2 = f("a");
        a2["installsAfter"] = json!(["ghcr.io/other/ns/old-name"]);
        let mut renamed = f("new-name");
        renamed["legacyIds"] = json!(["old-name"]);
        let c = Catalog::new(&[(&r("a"), a2), (&r("new-name"), renamed)]);
        assert_eq!(
            c.keys(json!({r("a"): {}, r("new-name"): {}}), &[]),
            [r("a"), r("new-name")]
        );
    }

    #[test]
    fn renamed_and_deprecated_features_warn() {
        let mut renamed = f("new-name");
        renamed["legacyIds"] = json!(["old-name"]);
        renamed["deprecated"] = json!(true);
        let c = Catalog::new(&[(&r("old-name"), renamed)]);
        let plan = c.order(json!({r("old-name"): {}}), &[]).unwrap();
        let messages: Vec<_> = plan.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                format!(
                    "Feature `{}` was renamed from `old-name` to `new-name`; update the reference",
                    r("old-name")
                )
                .as_str(),
                format!("Feature `{}` is deprecated", r("old-name")).as_str(),
            ]
        );
    }

    #[test]
    fn installs_after_bare_id_matches_same_namespace_and_local() {
        let mut a = f("a");
        a["installsAfter"] = json!(["zz"]);
        let c = Catalog::new(&[(&r("a"), a), (&r("zz"), f("zz"))]);
        assert_eq!(
            c.keys(json!({r("a"): {}, r("zz"): {}}), &[]),
            [r("zz"), r("a")]
        );
        let mut la = f("la");
        la["installsAfter"] = json!(["lz"]);
        let c = Catalog::new(&[("./la", la), ("./lz", f("lz"))]);
        assert_eq!(
            c.keys(json!({"./la": {}, "./lz": {}}), &[]),
            ["./lz", "./la"]
        );
    }

    #[test]
    fn override_order_wins_without_dependencies() {
        // checklist 46
        let c = Catalog::new(&[(&r("a"), f("a")), (&r("b"), f("b"))]);
        assert_eq!(
            c.keys(json!({r("a"): {}, r("b"): {}}), &[&r("b"), &r("a")]),
            [r("b"), r("a")]
        );
        // versions in override entries are ignored (with a warning)
        let plan = c
            .order(
                json!({r("a"): {}, format!("{}:1", r("b")): {}}),
                &[&format!("{}:2", r("b"))],
            )
            .unwrap();
        assert_eq!(plan.features[0].key, format!("{}:1", r("b")));
        assert!(
            plan.warnings
                .iter()
                .any(|w| w.message.contains("versions are ignored"))
        );
        // entries that match nothing warn
        let plan = c.order(json!({r("a"): {}}), &[&r("nope")]).unwrap();
        assert!(
            plan.warnings
                .iter()
                .any(|w| w.message.contains("matches no Feature"))
        );
    }

    #[test]
    fn override_order_never_before_dependencies() {
        // checklist 47
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {}});
        let mut b = f("b");
        b["installsAfter"] = json!([r("d")]);
        let c = Catalog::new(&[
            (&r("a"), a),
            (&r("b"), b),
            (&r("c"), f("c")),
            (&r("d"), f("d")),
        ]);
        let got = c.keys(
            json!({r("a"): {}, r("b"): {}, r("d"): {}}),
            &[&r("a"), &r("b")],
        );
        let pos = |k: &str| got.iter().position(|g| g == k).unwrap();
        assert!(pos(&r("c")) < pos(&r("a")), "{got:?}");
        assert!(pos(&r("d")) < pos(&r("b")), "{got:?}");
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn override_listed_feature_with_dependency_keeps_its_place() {
        // cli#1200 (spec-note 0450): `a` is listed first and depends on `c`; `b` has no
        // dependency. `a` installs before `b`, with `c` just before it.
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {}});
        let c = Catalog::new(&[(&r("a"), a), (&r("b"), f("b")), (&r("c"), f("c"))]);
        assert_eq!(
            c.keys(json!({r("b"): {}, r("a"): {}}), &[&r("a"), &r("b")]),
            [r("c"), r("a"), r("b")]
        );
        // Reversed override: `b` first, then `c`, `a`.
        assert_eq!(
            c.keys(json!({r("b"): {}, r("a"): {}}), &[&r("b"), &r("a")]),
            [r("b"), r("c"), r("a")]
        );
    }

    #[test]
    fn override_priority_reaches_transitive_and_soft_predecessors() {
        // a -> c -> d (dependsOn), a installsAfter e; b and e user-listed, b listed second.
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {}});
        a["installsAfter"] = json!([r("e")]);
        let mut cc = f("c");
        cc["dependsOn"] = json!({r("d"): {}});
        let c = Catalog::new(&[
            (&r("a"), a),
            (&r("b"), f("b")),
            (&r("c"), cc),
            (&r("d"), f("d")),
            (&r("e"), f("e")),
        ]);
        assert_eq!(
            c.keys(
                json!({r("e"): {}, r("b"): {}, r("a"): {}}),
                &[&r("a"), &r("b")]
            ),
            [r("d"), r("e"), r("c"), r("a"), r("b")]
        );
    }

    #[test]
    fn override_lists_two_features_each_with_dependencies() {
        // Each listed Feature comes in list order, its own dependency just before it; a
        // Feature the list does not name comes last.
        let mut a = f("a");
        a["dependsOn"] = json!({r("y"): {}});
        let mut b = f("b");
        b["dependsOn"] = json!({r("x"): {}});
        let c = Catalog::new(&[
            (&r("a"), a),
            (&r("b"), b),
            (&r("x"), f("x")),
            (&r("y"), f("y")),
            (&r("0"), f("0")),
        ]);
        assert_eq!(
            c.keys(
                json!({r("0"): {}, r("a"): {}, r("b"): {}}),
                &[&r("b"), &r("a")]
            ),
            [r("x"), r("b"), r("y"), r("a"), r("0")]
        );
    }

    #[test]
    fn equal_oci_features_install_once() {
        // checklist 48
        let mut a = f("a");
        a["dependsOn"] = json!({format!("{}:1", r("c")): {"o": "v"}});
        let mut b = f("b");
        b["dependsOn"] = json!({format!("{}:1.0", r("c")): {"o": "v"}});
        let c = Catalog::new(&[(&r("a"), a), (&r("b"), b), (&r("c"), f("c"))]);
        let plan = c.order(json!({r("a"): {}, r("b"): {}}), &[]).unwrap();
        let keys: Vec<_> = plan.features.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, [format!("{}:1", r("c")).as_str(), &r("a"), &r("b")]);
        // Omitted options equal to their defaults compare equal (spec-note 0043).
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {}});
        let c = Catalog::new(&[(&r("a"), a), (&r("c"), f("c"))]);
        assert_eq!(
            c.keys(json!({r("a"): {}, r("c"): {"o": "d"}}), &[]).len(),
            2
        );
    }

    #[test]
    fn references_differing_in_case_install_once() {
        // checklist 20 at the graph level
        let c = Catalog::new(&[(&r("a"), f("a"))]);
        let got = c.keys(json!({"GHCR.IO/O/R/A": {}, r("a"): {}}), &[]);
        assert_eq!(got, ["GHCR.IO/O/R/A"]);
    }

    #[test]
    fn different_options_install_twice() {
        // checklist 49
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {"o": "one"}});
        let c = Catalog::new(&[(&r("a"), a), (&r("c"), f("c"))]);
        let plan = c
            .order(json!({r("a"): {}, r("c"): {"o": "two"}}), &[])
            .unwrap();
        let cs: Vec<_> = plan
            .features
            .iter()
            .filter(|f| f.key == r("c"))
            .map(|f| f.options["o"].as_env())
            .collect();
        assert_eq!(cs.len(), 2);
        assert!(cs.contains(&"one".to_string()) && cs.contains(&"two".to_string()));
        // The one `a` depends on comes before `a`.
        let pos_a = plan.features.iter().position(|f| f.key == r("a")).unwrap();
        let pos_one = plan
            .features
            .iter()
            .position(|f| f.options.get("o").is_some_and(|v| v.as_env() == "one"))
            .unwrap();
        assert!(pos_one < pos_a);
    }

    #[test]
    fn distinct_local_features_never_dedupe() {
        // checklist 50
        let c = Catalog::new(&[("./a", f("same")), ("./b", f("same"))]);
        assert_eq!(c.keys(json!({"./b": {}, "./a": {}}), &[]), ["./a", "./b"]);
    }

    #[test]
    fn tie_break_tags_then_options() {
        let c = Catalog::new(&[
            (&format!("{}:latest", r("x")), f("x")),
            (&format!("{}:1.10", r("x")), f("x")),
            (&format!("{}:1.9", r("x")), f("x")),
        ]);
        let got = c.keys(
            json!({format!("{}:latest", r("x")): {}, format!("{}:1.10", r("x")): {}, format!("{}:1.9", r("x")): {}}),
            &[],
        );
        assert_eq!(
            got,
            [
                format!("{}:1.9", r("x")),
                format!("{}:1.10", r("x")),
                format!("{}:latest", r("x"))
            ]
        );
        assert_eq!(compare_tags("1", "1.0"), Ordering::Less);
        assert_eq!(compare_tags("2", "10"), Ordering::Less);
    }

    #[test]
    fn collation_follows_locale_compare_for_ascii() {
        let mut names = vec![
            "a/b", "aa", "a0", "a.b", "a-b", "a_b", "A", "a", "B", "b", "a~", "a@",
        ];
        names.sort_by(|x, y| collate(x, y));
        assert_eq!(
            names,
            [
                "a", "A", "a_b", "a-b", "a.b", "a@", "a/b", "a~", "a0", "aa", "b", "B"
            ]
        );
        // Differs from byte order: `_` sorts before `/` and `-`.
        assert_eq!(collate("ghcr.io/o/r_x/f", "ghcr.io/o/r/f"), Ordering::Less);
        assert_eq!("ghcr.io/o/r_x/f".cmp("ghcr.io/o/r/f"), Ordering::Greater);
    }

    /// A tiny deterministic generator (no `rand` dependency): 64-bit LCG.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn random_graphs_respect_every_edge_and_ignore_config_order() {
        let mut rng = Lcg(0x5eed);
        let mut cycles = 0;
        for case in 0..300 {
            let n = 2 + rng.next(7) as usize;
            let mut metas: Vec<Value> = (0..n).map(|i| f(&format!("f{i}"))).collect();
            let mut hard: Vec<Vec<usize>> = vec![Vec::new(); n];
            let mut soft: Vec<Vec<usize>> = vec![Vec::new(); n];
            for i in 1..n {
                for j in 0..i {
                    match rng.next(6) {
                        0 => hard[i].push(j),
                        1 => soft[i].push(j),
                        _ => {}
                    }
                }
                let deps: serde_json::Map<String, Value> = hard[i]
                    .iter()
                    .map(|&j| (r(&format!("f{j}")), json!({})))
                    .collect();
                metas[i]["dependsOn"] = Value::Object(deps);
                metas[i]["installsAfter"] = json!(
                    soft[i]
                        .iter()
                        .map(|&j| r(&format!("f{j}")))
                        .collect::<Vec<_>>()
                );
            }
            let keys: Vec<String> = (0..n).map(|i| r(&format!("f{i}"))).collect();
            let entries: Vec<(&str, Value)> = keys
                .iter()
                .map(|k| k.as_str())
                .zip(metas.iter().cloned())
                .collect();
            let c = Catalog::new(&entries);
            let mut user: Vec<usize> = (0..n).filter(|_| rng.next(2) == 0).collect();
            if user.is_empty() {
                user.push(n - 1);
            }
            let over: Vec<&str> = (0..n)
                .filter(|_| rng.next(4) == 0)
                .map(|i| keys[i].as_str())
                .collect();
            let config = |order: &[usize]| {
                Value::Object(
                    order
                        .iter()
                        .map(|&i| (keys[i].clone(), json!({})))
                        .collect(),
                )
            };
            let got = c.keys(config(&user), &over);
            let mut reversed = user.clone();
            reversed.reverse();
            assert_eq!(
                got,
                c.keys(config(&reversed), &over),
                "case {case}: config order matters"
            );
            let pos = |i: usize| got.iter().position(|k| *k == keys[i]);
            let mut seen = std::collections::HashSet::new();
            for k in &got {
                assert!(seen.insert(k.clone()), "case {case}: {k} installed twice");
            }
            for i in 0..n {
                let Some(pi) = pos(i) else { continue };
                for &j in &hard[i] {
                    let pj = pos(j)
                        .unwrap_or_else(|| panic!("case {case}: dependency f{j} of f{i} missing"));
                    assert!(pj < pi, "case {case}: f{j} must precede f{i}: {got:?}");
                }
                for &j in &soft[i] {
                    if let Some(pj) = pos(j) {
                        assert!(pj < pi, "case {case}: f{j} should precede f{i}: {got:?}");
                    }
                }
            }
            for &u in &user {
                assert!(pos(u).is_some(), "case {case}: user Feature f{u} missing");
            }
            // Adding a back edge f0 -> f(n-1) along an existing path makes a cycle, reported
            // with real edges only.
            if pos(0).is_some() && pos(n - 1).is_some() && !hard[n - 1].is_empty() {
                let mut cyclic = metas.clone();
                cyclic[0]["dependsOn"] = json!({keys[n - 1].clone(): {}});
                let entries: Vec<(&str, Value)> = keys
                    .iter()
                    .map(|k| k.as_str())
                    .zip(cyclic.iter().cloned())
                    .collect();
                let c = Catalog::new(&entries);
                match c.order(config(&user), &over) {
                    Err(FeatureError::Cycle { cycle }) => {
                        cycles += 1;
                        assert!(
                            cycle.len() >= 2 && cycle.first() == cycle.last(),
                            "{cycle:?}"
                        );
                        for pair in cycle.windows(2) {
                            let a = keys.iter().position(|k| *k == pair[0]).unwrap();
                            let b = keys.iter().position(|k| *k == pair[1]).unwrap();
                            let edge = (a == 0 && b == n - 1)
                                || hard[a].contains(&b)
                                || soft[a].contains(&b);
                            assert!(
                                edge,
                                "case {case}: {} -> {} is not an edge",
                                pair[0], pair[1]
                            );
                        }
                    }
                    // f0 may not reach f(n-1)'s dependencies back: then there is no cycle.
                    Ok(_) => {}
                    Err(e) => panic!("case {case}: {e}"),
                }
            }
        }
        assert!(cycles > 40, "only {cycles} cyclic cases were generated");
    }

    #[test]
    fn install_order_json_shape() {
        let c = Catalog::new(&[(&r("a"), f("a")), ("./l", f("l"))]);
        let key = format!("{}:1", r("a"));
        let plan = c.order(json!({"./l": "1", key: {"o": "x"}}), &[]).unwrap();
        let digest = format!("sha256:{}", sha(&r("a")));
        assert_eq!(
            plan.to_install_order_json(),
            json!({"installOrder": [
                {"id": "./l", "options": "1"},
                {"id": format!("{}@{digest}", r("a")), "options": {"o": "x"}}
            ]})
        );
    }

    #[test]
    fn resolver_called_once_per_reference() {
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {"o": "1"}});
        let mut b = f("b");
        b["dependsOn"] = json!({r("c"): {"o": "2"}});
        let c = Catalog::new(&[(&r("a"), a), (&r("b"), b), (&r("c"), f("c"))]);
        let mut calls = Vec::new();
        let mut inner = c.resolver();
        let map: IndexMap<String, Value> =
            serde_json::from_value(json!({r("a"): {}, r("b"): {}})).unwrap();
        let plan = order(&map, &[], &mut |r| {
            calls.push(r.to_string());
            inner(r)
        })
        .unwrap();
        assert_eq!(plan.features.len(), 4);
        assert_eq!(calls.len(), 3, "{calls:?}");
    }

    #[test]
    fn version_shorthand_without_version_option_is_ignored() {
        let c = Catalog::new(&[("./plain", json!({"id": "plain"})), ("./v", f("v"))]);
        let plan = c.order(json!({"./plain": "latest"}), &[]).unwrap();
        assert!(plan.features[0].options.is_empty());
        assert!(plan.features[0].user_options.is_empty());
        assert_eq!(plan.warnings.len(), 1);
        assert!(plan.warnings[0].message.contains("has no `version` option"));
        // With a `version` option the shorthand applies (checklist 25).
        let mut v = f("v");
        v["options"]["version"] = json!({"type": "string", "default": "x"});
        let c = Catalog::new(&[("./v", v)]);
        let plan = c.order(json!({"./v": "1.18"}), &[]).unwrap();
        assert_eq!(plan.features[0].options["version"].as_env(), "1.18");
        assert!(plan.warnings.is_empty());
    }

    #[test]
    fn dependency_refs_parse_depends_on_keys() {
        let mut a = f("a");
        a["dependsOn"] = json!({r("c"): {}, "./x": "1"});
        let m = FeatureMetadata::parse(&a.to_string(), Path::new("t.json")).unwrap();
        let refs = dependency_refs(&m).unwrap();
        assert_eq!(refs[0].resource(), r("c"));
        assert!(refs[1].is_local());
    }

    #[test]
    fn invalid_reference_in_depends_on_is_an_error() {
        let mut a = f("a");
        a["dependsOn"] = json!({"node": {}});
        let c = Catalog::new(&[(&r("a"), a)]);
        let e = c.order(json!({r("a"): {}}), &[]).unwrap_err();
        assert!(matches!(e, FeatureError::InvalidReference { .. }), "{e}");
    }
}
