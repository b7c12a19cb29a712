//! OCI distribution against real registries: the shared local registry
//! (`DEVCELL_TEST_REGISTRY`) and private `docker-registry` instances started per test.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};

use devcell::features::fetch::{FeatureSource, FetchError, FetchOptions, Fetcher};
use devcell::oci::OciError;
use devcell::oci::registry::{Platform, Registry, RegistryOptions, parse_reference};
use serde_json::Value;

use crate::support::{
    FileServer, PrivateRegistry, REGISTRY_PASSWORD, REGISTRY_USER, copy_tree, fixture, publish,
    test_registry, unique,
};

fn collection() -> PathBuf {
    fixture("features/collection/src")
}

fn fetcher(cache: &Path, registry: RegistryOptions, offline: bool) -> Fetcher {
    Fetcher::new(FetchOptions {
        cache_dir: Some(cache.to_owned()),
        offline,
        refresh_tags: false,
        registry: RegistryOptions {
            docker_config: Some(PathBuf::from("/nonexistent/docker-config.json")),
            ..registry
        },
        allowed_hosts: None,
    })
    .expect("fetcher")
}

fn oci(r: &str) -> FeatureSource {
    FeatureSource::Oci(r.to_owned())
}

/// The hello fixture with its version set to `version`, in a fresh folder.
fn hello_at(version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&collection().join("hello"), dir.path());
    let path = dir.path().join("devcontainer-feature.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["version"] = Value::from(version);
    std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
    dir
}

#[tokio::test]
async fn publish_then_pull_by_tag_and_by_digest() {
    let Some(reg) = test_registry() else { return };
    let ns = format!("{}/features", unique("pull"));
    let out = publish(&collection(), &reg, &ns);
    assert_eq!(
        out["hello"]["publishedTags"],
        serde_json::json!(["1", "1.0", "1.0.0", "latest"])
    );
    assert_eq!(
        out["greeter"]["publishedLegacyIds"],
        serde_json::json!(["old-greeter"])
    );
    let digest = out["hello"]["digest"].as_str().unwrap().to_owned();

    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let dest = tempfile::tempdir().unwrap();
    let by_tag = f
        .resolve_and_fetch(&oci(&format!("{reg}/{ns}/hello:1")), &dest.path().join("a"))
        .await
        .unwrap();
    assert_eq!(by_tag.integrity.as_deref(), Some(digest.as_str()));
    assert_eq!(
        by_tag.resolved.as_deref(),
        Some(format!("{reg}/{ns}/hello@{digest}").as_str())
    );
    assert_eq!(by_tag.id(), Some("hello"));
    let install = dest.path().join("a/install.sh");
    assert!(
        std::fs::read_to_string(&install)
            .unwrap()
            .contains("GREETING")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(
        std::fs::metadata(&install).unwrap().permissions().mode() & 0o111,
        0,
        "install.sh keeps its executable bit"
    );

    let by_digest = f
        .resolve_and_fetch(
            &oci(&format!("{reg}/{ns}/hello@{digest}")),
            &dest.path().join("b"),
        )
        .await
        .unwrap();
    assert_eq!(by_digest.integrity.as_deref(), Some(digest.as_str()));
    assert!(dest.path().join("b/devcontainer-feature.json").is_file());

    // The legacy id serves the same artifact; no tag means `latest`.
    let legacy = f
        .resolve(&oci(&format!("{reg}/{ns}/old-greeter")))
        .await
        .unwrap();
    assert_eq!(
        legacy.integrity.as_deref(),
        out["greeter"]["digest"].as_str()
    );
    assert_eq!(
        legacy.metadata["dependsOn"],
        serde_json::json!({"ghcr.io/devcell-test/features/hello:1": {}})
    );

    // The collection artifact sits at <registry>/<namespace>:latest with its own media type,
    // and is refused as a Feature.
    let r = Registry::new(RegistryOptions::default()).unwrap();
    let coll = r
        .pull_manifest(&parse_reference(&format!("{reg}/{ns}:latest")).unwrap())
        .await
        .unwrap();
    let m: Value = serde_json::from_slice(&coll.bytes).unwrap();
    assert_eq!(
        m["layers"][0]["mediaType"],
        "application/vnd.devcontainers.collection.layer.v1+json"
    );
    assert_eq!(
        m["layers"][0]["annotations"]["org.opencontainers.image.title"],
        "devcontainer-collection.json"
    );
    let err = f.resolve(&oci(&format!("{reg}/{ns}"))).await.unwrap_err();
    assert!(matches!(err, FetchError::NotAFeature { .. }), "{err}");
}

#[tokio::test]
async fn tags_move_only_to_the_highest_version_checklist_59() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("tags");
    let mut digests = std::collections::BTreeMap::new();
    for (v, tags) in [
        ("1.2.3", vec!["1", "1.2", "1.2.3", "latest"]),
        ("1.3.0", vec!["1", "1.3", "1.3.0", "latest"]),
        ("1.2.4", vec!["1.2", "1.2.4"]),
    ] {
        let dir = hello_at(v);
        let out = publish(dir.path(), &reg, &ns);
        assert_eq!(
            out["hello"]["publishedTags"],
            serde_json::json!(tags),
            "{v}"
        );
        assert_eq!(out["hello"]["version"], v);
        digests.insert(v, out["hello"]["digest"].as_str().unwrap().to_owned());
    }
    // Republishing an existing version pushes nothing: `{}`.
    let again = publish(hello_at("1.2.4").path(), &reg, &ns);
    assert_eq!(again["hello"], serde_json::json!({}));

    let r = Registry::new(RegistryOptions::default()).unwrap();
    let repo = format!("{reg}/{ns}/hello");
    let mut tags = r.list_tags(&parse_reference(&repo).unwrap()).await.unwrap();
    tags.sort();
    assert_eq!(
        tags,
        ["1", "1.2", "1.2.3", "1.2.4", "1.3", "1.3.0", "latest"]
    );
    for (tag, version) in [
        ("1", "1.3.0"),
        ("latest", "1.3.0"),
        ("1.3", "1.3.0"),
        ("1.2", "1.2.4"),
        ("1.2.3", "1.2.3"),
        ("1.2.4", "1.2.4"),
    ] {
        let m = r
            .pull_manifest(&parse_reference(&format!("{repo}:{tag}")).unwrap())
            .await
            .unwrap();
        assert_eq!(m.digest, digests[version], "tag {tag}");
    }
}

#[tokio::test]
async fn second_resolve_is_served_from_cache_with_the_registry_stopped() {
    let Some(mut private) = PrivateRegistry::start() else {
        return;
    };
    let reg = private.addr.clone();
    publish(&collection(), &reg, "cache/features");
    let reference = format!("{reg}/cache/features/hello:1");
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // Two fetchers on one cache at once (two processes in real life) both succeed.
    let (a, b) = {
        let f1 = fetcher(cache.path(), RegistryOptions::default(), false);
        let f2 = fetcher(cache.path(), RegistryOptions::default(), false);
        let s = oci(&reference);
        let (one, two) = (out.path().join("one"), out.path().join("two"));
        let (a, b) = tokio::join!(
            f1.resolve_and_fetch(&s, &one),
            f2.resolve_and_fetch(&s, &two)
        );
        (a.unwrap(), b.unwrap())
    };
    assert_eq!(a.integrity, b.integrity);

    private.stop();
    // Same cache: the tag cannot be revalidated, so the cached resolution serves, said once
    // (spec-note 0451).
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let again = f
        .resolve_and_fetch(&oci(&reference), &out.path().join("three"))
        .await
        .unwrap();
    assert_eq!(again.integrity, a.integrity);
    assert!(out.path().join("three/install.sh").is_file());
    let said: Vec<String> = f.take_warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(
        said,
        [format!(
            "registry unreachable: Feature tags resolved from the cache, not revalidated: {reference}"
        )]
    );
    // Offline too.
    let off = fetcher(cache.path(), RegistryOptions::default(), true);
    off.resolve_and_fetch(&oci(&reference), &out.path().join("four"))
        .await
        .unwrap();
    let said: Vec<String> = off.take_warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(
        said,
        [format!(
            "offline: Feature tags resolved from the cache, not revalidated against their registry: {reference}"
        )]
    );
    // A fresh cache proves the registry is really gone.
    let empty = tempfile::tempdir().unwrap();
    let cold = fetcher(empty.path(), RegistryOptions::default(), false);
    let err = cold.resolve(&oci(&reference)).await.unwrap_err();
    assert!(
        matches!(
            &err,
            FetchError::Oci {
                source: OciError::Registry { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn offline_miss_names_the_reference() {
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), true);
    let reference = "127.0.0.1:9/devcell/never/hello:1";
    let err = f.resolve(&oci(reference)).await.unwrap_err();
    let chain = format!("{err} / {}", std::error::Error::source(&err).unwrap());
    assert!(chain.contains(reference), "{chain}");
    assert!(chain.contains("offline"), "{chain}");
    let url = "https://example.invalid/devcontainer-feature-x.tgz";
    let err = f
        .resolve(&FeatureSource::Tarball(url.into()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Oci { source: OciError::OfflineMiss { reference }, .. } if reference == url),
        "{err:?}"
    );
}

#[tokio::test]
async fn mirror_mapping_serves_ghcr_references() {
    let Some(private) = PrivateRegistry::start() else {
        return;
    };
    publish(&collection(), &private.addr, "devcell-test/features");
    let cache = tempfile::tempdir().unwrap();
    let mut options = RegistryOptions::default();
    options
        .mirrors
        .insert("ghcr.io".into(), private.addr.clone());
    let f = fetcher(cache.path(), options, false);
    let dest = tempfile::tempdir().unwrap();
    let r = f
        .resolve_and_fetch(
            &oci("ghcr.io/devcell-test/features/hello:1"),
            &dest.path().join("hello"),
        )
        .await
        .unwrap();
    // The pin names the original registry: the mirror is a transport detail.
    assert!(
        r.resolved
            .as_deref()
            .unwrap()
            .starts_with("ghcr.io/devcell-test/features/hello@sha256:"),
        "{:?}",
        r.resolved
    );
    assert!(dest.path().join("hello/install.sh").is_file());
}

#[tokio::test]
async fn tampered_blob_and_manifest_are_refused() {
    let Some(private) = PrivateRegistry::start() else {
        return;
    };
    let reg = &private.addr;
    let out = publish(&collection(), reg, "tamper");
    let manifest_digest = out["hello"]["digest"].as_str().unwrap().to_owned();
    let r = Registry::new(RegistryOptions::default()).unwrap();
    let pulled = r
        .pull_manifest(&parse_reference(&format!("{reg}/tamper/hello:1")).unwrap())
        .await
        .unwrap();
    let m: Value = serde_json::from_slice(&pulled.bytes).unwrap();
    let layer = m["layers"][0]["digest"].as_str().unwrap().to_owned();

    // Layer bytes replaced on the registry's disk (same length, so only the hash differs).
    let data = private.blob_data(&layer);
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[600] ^= 0xff;
    std::fs::write(&data, &bytes).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let resolved = f
        .resolve(&oci(&format!("{reg}/tamper/hello:1")))
        .await
        .unwrap();
    let dest = tempfile::tempdir().unwrap();
    let err = f
        .fetch(&resolved, &dest.path().join("hello"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            FetchError::Oci {
                source: OciError::DigestMismatch { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!dest.path().join("hello").exists(), "nothing materialised");
    assert!(!f.store().has_blob(&layer), "nothing cached");

    // Manifest bytes tampered: a pull by digest is refused (checklist 21, 63).
    let mdata = private.blob_data(&manifest_digest);
    let text = std::fs::read_to_string(&mdata).unwrap();
    std::fs::write(&mdata, text.replace("Hello", "Jello")).unwrap();
    let cache2 = tempfile::tempdir().unwrap();
    let f2 = fetcher(cache2.path(), RegistryOptions::default(), false);
    let err = f2
        .resolve(&oci(&format!("{reg}/tamper/hello@{manifest_digest}")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            FetchError::Oci {
                source: OciError::DigestMismatch { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn lockfile_pin_mismatch_is_an_error() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("pin");
    publish(&collection(), &reg, &ns);
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let source = oci(&format!("{reg}/{ns}/hello:1"));
    let good = f.resolve(&source).await.unwrap();
    let pinned = f
        .resolve_pinned(&source, good.integrity.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(pinned.integrity, good.integrity);
    // A pin naming another manifest (the greeter's) is not what `hello:1` is.
    let other = f
        .resolve(&oci(&format!("{reg}/{ns}/greeter:2")))
        .await
        .unwrap();
    let pinned = f
        .resolve_pinned(
            &oci(&format!(
                "{reg}/{ns}/hello@{}",
                good.integrity.as_deref().unwrap()
            )),
            other.integrity.as_deref().unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(pinned, FetchError::PinMismatch { .. }), "{pinned}");
}

#[tokio::test]
async fn metadata_without_annotation_is_read_from_the_layer() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("noannot");
    // Push an artifact like an older publisher would: no `dev.containers.metadata`.
    let dir = hello_at("3.0.0");
    let packaged = devcell::features::publish::package_feature(dir.path(), false).unwrap();
    let r = Registry::new(RegistryOptions::default()).unwrap();
    let repo = format!("{reg}/{ns}/hello");
    let base = parse_reference(&format!("{repo}:3")).unwrap();
    r.push_blob(&base, bytes::Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let layer = r.push_blob(&base, packaged.archive.clone()).await.unwrap();
    let manifest = devcell::features::publish::artifact_manifest(
        "application/vnd.devcontainers.layer.v1+tar",
        &layer,
        packaged.archive.len(),
        "devcontainer-feature-hello.tgz",
        &Default::default(),
    );
    r.push_manifest(
        &base,
        manifest,
        "application/vnd.oci.image.manifest.v1+json",
    )
    .await
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let resolved = f.resolve(&oci(&format!("{repo}:3"))).await.unwrap();
    assert_eq!(resolved.version(), Some("3.0.0"));
    // The layer was downloaded (and cached) to read it.
    assert!(f.store().has_blob(&layer));
}

#[tokio::test]
async fn image_index_resolves_to_the_requested_platform() {
    let Some(reg) = test_registry() else { return };
    let repo = format!("{reg}/{}/image", unique("index"));
    let r = Registry::new(RegistryOptions::default()).unwrap();
    let base = parse_reference(&format!("{repo}:multi")).unwrap();
    let mut entries = Vec::new();
    for (os, arch) in [("linux", "arm64"), ("linux", "amd64")] {
        let config = format!(r#"{{"architecture":"{arch}","os":"{os}"}}"#);
        let config_digest = r
            .push_blob(&base, bytes::Bytes::from(config.clone()))
            .await
            .unwrap();
        let m = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": config_digest, "size": config.len()},
            "layers": [],
        });
        let bytes = bytes::Bytes::from(serde_json::to_vec(&m).unwrap());
        let len = bytes.len();
        let tag = parse_reference(&format!("{repo}:{arch}")).unwrap();
        let d = r
            .push_manifest(&tag, bytes, "application/vnd.oci.image.manifest.v1+json")
            .await
            .unwrap();
        entries.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": d, "size": len, "platform": {"os": os, "architecture": arch},
        }));
    }
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": entries,
    });
    r.push_manifest(
        &base,
        bytes::Bytes::from(serde_json::to_vec(&index).unwrap()),
        "application/vnd.oci.image.index.v1+json",
    )
    .await
    .unwrap();
    for arch in ["amd64", "arm64"] {
        let (m, digest) = r
            .pull_image_manifest(
                &base,
                &Platform {
                    os: "linux".into(),
                    architecture: arch.into(),
                    variant: None,
                },
            )
            .await
            .unwrap();
        let expected = entries
            .iter()
            .find(|e| e["platform"]["architecture"] == arch)
            .unwrap();
        assert_eq!(digest, expected["digest"].as_str().unwrap());
        let config = r.pull_blob(&base, &m.config).await.unwrap();
        assert!(String::from_utf8_lossy(&config).contains(arch));
    }
    let err = r
        .pull_image_manifest(
            &base,
            &Platform {
                os: "windows".into(),
                architecture: "amd64".into(),
                variant: None,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::NoPlatformMatch { .. }), "{err}");
}

#[tokio::test]
async fn direct_tarball_is_downloaded_cached_and_extracted() {
    let served = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_devcell"))
        .args(["features", "package"])
        .arg(collection())
        .arg("-o")
        .arg(served.path())
        .status()
        .unwrap();
    assert!(status.success());
    let server = FileServer::start(served.path());
    let url = format!("{}/devcontainer-feature-hello.tgz", server.base);
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let r = f
        .resolve_and_fetch(&FeatureSource::Tarball(url.clone()), &out.path().join("t"))
        .await
        .unwrap();
    assert_eq!(r.id(), Some("hello"));
    assert_eq!(r.resolved.as_deref(), Some(url.as_str()));
    let bytes = std::fs::read(served.path().join("devcontainer-feature-hello.tgz")).unwrap();
    assert_eq!(
        r.integrity.as_deref(),
        Some(devcell::oci::digest::sha256_digest(&bytes).as_str())
    );
    assert!(out.path().join("t/install.sh").is_file());
    drop(server);
    // Cached: works offline with the server gone.
    let off = fetcher(cache.path(), RegistryOptions::default(), true);
    off.resolve_and_fetch(&FeatureSource::Tarball(url), &out.path().join("u"))
        .await
        .unwrap();
}

fn docker_config(dir: &Path, json: &str) -> PathBuf {
    let path = dir.join("config.json");
    std::fs::write(&path, json).unwrap();
    path
}

#[tokio::test]
async fn tls_registry_with_basic_auth_needs_the_ca_and_credentials() {
    let Some(private) = PrivateRegistry::start_secure() else {
        return;
    };
    let addr = private.addr.clone();
    let home = tempfile::tempdir().unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}"));
    let with_auths = docker_config(
        home.path(),
        &format!(r#"{{"auths":{{"{addr}":{{"auth":"{auth}"}}}}}}"#),
    );
    let options = |ca: bool, config: Option<PathBuf>| RegistryOptions {
        secure_registries: vec![addr.clone()],
        extra_ca_certificates: if ca {
            vec![private.ca_certificate()]
        } else {
            vec![]
        },
        docker_config: Some(config.unwrap_or_else(|| PathBuf::from("/nonexistent/config.json"))),
        ..RegistryOptions::default()
    };
    let publish_with = |o: RegistryOptions| {
        let addr = addr.clone();
        async move {
            let r = Registry::new(o).unwrap();
            devcell::features::publish::publish(&r, &collection(), &addr, "secure").await
        }
    };
    // Without the CA the TLS handshake fails; without credentials the registry says 401.
    let err = publish_with(options(false, Some(with_auths.clone())))
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("UnknownIssuer"), "{err:?}");
    let err = publish_with(options(true, None)).await.unwrap_err();
    assert!(format!("{err:?}").contains("UnauthorizedError"), "{err:?}");
    // With both it works, and the credentials never show in Debug output.
    let registry = Registry::new(options(true, Some(with_auths.clone()))).unwrap();
    let out = devcell::features::publish::publish(&registry, &collection(), &addr, "secure")
        .await
        .unwrap();
    assert!(out["hello"].digest.is_some());
    let cache = tempfile::tempdir().unwrap();
    let f = Fetcher::new(FetchOptions {
        cache_dir: Some(cache.path().to_owned()),
        registry: options(true, Some(with_auths)),
        ..Default::default()
    })
    .unwrap();
    let dest = tempfile::tempdir().unwrap();
    f.resolve_and_fetch(
        &oci(&format!("{addr}/secure/hello:1")),
        &dest.path().join("h"),
    )
    .await
    .unwrap();
    for shown in [format!("{registry:?}"), format!("{f:?}")] {
        assert!(
            !shown.contains(REGISTRY_PASSWORD) && !shown.contains(&auth),
            "{shown}"
        );
    }

    // The same registry through a credential helper (`credHelpers`).
    let helpers = tempfile::tempdir().unwrap();
    let helper = helpers.path().join("docker-credential-devcelltest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\nread r\n[ \"$r\" = {addr} ] || {{ echo 'credentials not found'; exit 1; }}\n\
             printf '{{\"Username\":\"{REGISTRY_USER}\",\"Secret\":\"{REGISTRY_PASSWORD}\"}}'\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let with_helper = docker_config(
        helpers.path(),
        &format!(r#"{{"credHelpers":{{"{addr}":"devcelltest"}}}}"#),
    );
    let cache = tempfile::tempdir().unwrap();
    let f = Fetcher::new(FetchOptions {
        cache_dir: Some(cache.path().to_owned()),
        registry: RegistryOptions {
            credential_helper_dir: Some(helpers.path().to_owned()),
            ..options(true, Some(with_helper))
        },
        ..Default::default()
    })
    .unwrap();
    f.resolve_and_fetch(
        &oci(&format!("{addr}/secure/greeter:2")),
        &dest.path().join("g"),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn plan_orders_dependencies_writes_and_honours_the_lockfile() {
    use devcell::features::FeatureError;
    use devcell::features::fetch::PlanRequest;
    use devcell::features::lockfile;
    let Some(mut private) = PrivateRegistry::start() else {
        return;
    };
    // greeter dependsOn ghcr.io/devcell-test/features/hello:1, served by the mirror.
    publish(&collection(), &private.addr, "devcell-test/features");
    let ws = tempfile::tempdir().unwrap();
    let dc = ws.path().join(".devcontainer");
    copy_tree(&collection().join("hello"), &dc.join("hello"));
    let features: indexmap::IndexMap<String, Value> = serde_json::from_str(
        r#"{"ghcr.io/devcell-test/features/greeter:2": {}, "./hello": {"greeting": "hi"}}"#,
    )
    .unwrap();
    let mut options = RegistryOptions::default();
    options
        .mirrors
        .insert("ghcr.io".into(), private.addr.clone());
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), options.clone(), false);
    let request = PlanRequest {
        features: &features,
        override_order: &[],
        config_dir: &dc,
        devcontainer_dir: &dc,
        lockfile: None,
    };
    let plan = f.plan(&request).await.unwrap();
    let keys: Vec<&str> = plan
        .install
        .features
        .iter()
        .map(|p| p.key.as_str())
        .collect();
    // Round 1: the dependency-free `./hello` and hello (pulled in by dependsOn), in
    // resource-name order; round 2: greeter.
    assert_eq!(
        keys,
        [
            "./hello",
            "ghcr.io/devcell-test/features/hello:1",
            "ghcr.io/devcell-test/features/greeter:2",
        ]
    );
    let lock = plan.lockfile();
    let hello_lock = lock.features["ghcr.io/devcell-test/features/hello:1"].clone();
    assert!(
        hello_lock
            .resolved
            .starts_with("ghcr.io/devcell-test/features/hello@sha256:")
    );
    assert_eq!(
        lock.features["ghcr.io/devcell-test/features/greeter:2"].depends_on,
        Some(vec!["ghcr.io/devcell-test/features/hello:1".to_owned()])
    );
    assert_eq!(lock.features.len(), 2, "local Features are not locked");
    let lock_path = dc.join(lockfile::LOCKFILE);
    lockfile::write(&lock_path, &lock, false).unwrap();

    let root = tempfile::tempdir().unwrap();
    let dirs = f.fetch_plan(&plan, root.path()).await.unwrap();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["hello_0", "hello_1", "greeter_2"]);
    assert!(dirs.iter().all(|d| d.join("install.sh").is_file()));

    // A newer hello 1.0.1 moves tag `1`; the lockfile keeps the old digest.
    let newer = hello_at("1.0.1");
    publish(newer.path(), &private.addr, "devcell-test/features");
    let fresh_cache = tempfile::tempdir().unwrap();
    let fresh = fetcher(fresh_cache.path(), options.clone(), false);
    let unlocked = fresh.plan(&request).await.unwrap();
    let unlocked_hello = &unlocked.install.features[1];
    assert_eq!(unlocked_hello.metadata.version.as_deref(), Some("1.0.1"));
    let state = lockfile::read(&lock_path).unwrap();
    let locked_request = PlanRequest {
        lockfile: Some((state.lockfile().unwrap(), &lock_path)),
        ..request
    };
    let locked = fresh.plan(&locked_request).await.unwrap();
    assert_eq!(
        locked.install.features[1].metadata.version.as_deref(),
        Some("1.0.0")
    );
    assert_eq!(
        locked.install.features[1].canonical.as_deref(),
        Some(hello_lock.integrity.as_str())
    );
    assert_eq!(locked.lockfile(), lock, "--frozen-lockfile would accept it");
    lockfile::write(&lock_path, &locked.lockfile(), true).unwrap();
    assert!(lockfile::write(&lock_path, &unlocked.lockfile(), true).is_err());

    // A reference pinned by digest that disagrees with the lockfile is an error.
    let pinned_key = format!(
        "ghcr.io/devcell-test/features/hello@{}",
        unlocked_hello.canonical.as_deref().unwrap()
    );
    let mut bad_lock = lock.clone();
    bad_lock
        .features
        .insert(pinned_key.clone(), hello_lock.clone());
    let pinned: indexmap::IndexMap<String, Value> =
        [(pinned_key, Value::Bool(true))].into_iter().collect();
    let err = fresh
        .plan(&PlanRequest {
            features: &pinned,
            lockfile: Some((&bad_lock, &lock_path)),
            ..request
        })
        .await
        .unwrap_err();
    assert!(matches!(err, FeatureError::Lockfile { .. }), "{err}");

    // The first cache resolves the same config with the registry gone, offline.
    private.stop();
    let offline = fetcher(cache.path(), options, true);
    let again = offline.plan(&request).await.unwrap();
    assert_eq!(again.lockfile(), lock);
}

/// Interop with `@devcontainers/cli` at the artifact level (`DEVCELL_TEST_REFCLI`, see
/// `support::refcli`; `build`/`up` in both directions are in `interop.rs`). The reference
/// CLI speaks plain HTTP only to `localhost`, so the registry is addressed as
/// `localhost:<port>`.
#[tokio::test]
async fn interop_with_the_reference_cli() {
    let Some(reg) = test_registry() else { return };
    let Some(refcli) = crate::support::refcli::reference_cli("interop_with_the_reference_cli")
    else {
        return;
    };
    let port = reg.rsplit(':').next().unwrap();
    let reg = format!("localhost:{port}");
    let ns = unique("interop");

    // devcell publishes; the reference reads the manifest and resolves the same digest.
    let ours = publish(&collection().join("hello"), &reg, &format!("{ns}/ours"));
    let out = refcli
        .command()
        .args([
            "features",
            "info",
            "manifest",
            &format!("{reg}/{ns}/ours/hello:1"),
        ])
        .args(["--output-format", "json"])
        .long_output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        info["canonicalId"],
        format!(
            "{reg}/{ns}/ours/hello@{}",
            ours["hello"]["digest"].as_str().unwrap()
        )
    );

    // The reference publishes; devcell resolves, verifies and extracts it.
    let dir = hello_at("1.4.0");
    let out = refcli
        .command()
        .args(["features", "publish"])
        .arg(dir.path())
        .args(["-r", &reg, "-n", &format!("{ns}/theirs")])
        .long_output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        theirs["hello"]["publishedTags"],
        serde_json::json!(["1", "1.4", "1.4.0", "latest"])
    );
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let dest = tempfile::tempdir().unwrap();
    let r = f
        .resolve_and_fetch(
            &oci(&format!("{reg}/{ns}/theirs/hello:1.4")),
            &dest.path().join("h"),
        )
        .await
        .unwrap();
    assert_eq!(r.integrity.as_deref(), theirs["hello"]["digest"].as_str());
    assert_eq!(r.version(), Some("1.4.0"));
    assert!(dest.path().join("h/install.sh").is_file());
    refcli.assert_stayed_local();
}

#[tokio::test]
async fn bearer_challenge_is_answered_with_a_token_checklist_56() {
    // The token endpoint: a static file served at <base>/token (the query string is ignored).
    let realm_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        realm_dir.path().join("token"),
        r#"{"token":"devcell-test-token"}"#,
    )
    .unwrap();
    let server = FileServer::start(realm_dir.path());
    let Some(private) = PrivateRegistry::start_with_token_realm(&format!("{}/token", server.base))
    else {
        return;
    };
    // Anonymous access without the token flow is refused by this registry…
    let refused = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys,urllib.request\ntry:\n urllib.request.urlopen(sys.argv[1]); print(200)\nexcept Exception as e: print(e.code)",
            &format!("http://{}/v2/", private.addr),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&refused.stdout).trim(), "401");
    // …while devcell (push and pull) gets a bearer token from the realm and succeeds.
    let out = publish(&collection(), &private.addr, "token/features");
    assert!(out["hello"]["digest"].is_string(), "{out}");
    let cache = tempfile::tempdir().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let dest = tempfile::tempdir().unwrap();
    let r = f
        .resolve_and_fetch(
            &oci(&format!("{}/token/features/hello:1", private.addr)),
            &dest.path().join("h"),
        )
        .await
        .unwrap();
    assert_eq!(r.integrity.as_deref(), out["hello"]["digest"].as_str());
}

#[test]
fn resolve_dependencies_fetches_oci_features_through_the_cache() {
    let Some(mut private) = PrivateRegistry::start() else {
        return;
    };
    let reg = private.addr.clone();
    let published = publish(&collection(), &reg, "cli/features");
    let ws = tempfile::tempdir().unwrap();
    let dc = ws.path().join(".devcontainer");
    copy_tree(&collection().join("hello"), &dc.join("hello"));
    std::fs::write(
        dc.join("devcontainer.json"),
        format!(
            r#"{{"image": "x", "features": {{"{reg}/cli/features/hello:1": {{"greeting": "hey"}}, "./hello": {{}}}}}}"#
        ),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = |cache: &Path, offline: bool| {
        let mut cmd = crate::support::devcell();
        cmd.args(["features", "resolve-dependencies", "--workspace-folder"])
            .arg(ws.path())
            .arg("--cache-dir")
            .arg(cache);
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().unwrap()
    };
    let cold = run(cache.path(), false);
    let progress = String::from_utf8_lossy(&cold.stderr).into_owned();
    assert!(
        progress.contains(&format!(
            "[devcell] pulling manifest {reg}/cli/features/hello:1"
        )),
        "{progress}"
    );
    let first = crate::support::stdout_json(&cold);
    let ids: Vec<&str> = first["installOrder"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    // The reference CLI's shape: OCI Features as `<resource>@<manifest digest>`.
    let oci_key = format!(
        "{reg}/cli/features/hello@{}",
        published["hello"]["digest"].as_str().unwrap()
    );
    assert_eq!(ids, ["./hello", oci_key.as_str()], "{first}");
    private.stop();
    let again = crate::support::stdout_json(&run(cache.path(), true));
    assert_eq!(again, first);
    let empty = tempfile::tempdir().unwrap();
    let err = crate::support::assert_failed(&run(empty.path(), true));
    assert!(err.contains("offline"), "{err}");
}

#[tokio::test]
async fn blob_larger_than_its_descriptor_is_refused() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("size");
    publish(&collection().join("hello"), &reg, &ns);
    let r = Registry::new(RegistryOptions::default()).unwrap();
    let reference = parse_reference(&format!("{reg}/{ns}/hello:1")).unwrap();
    let pulled = r.pull_manifest(&reference).await.unwrap();
    let oci_client::manifest::OciManifest::Image(m) = pulled.manifest else {
        panic!("not an image manifest");
    };
    let mut layer = m.layers[0].clone();
    assert_eq!(
        r.pull_blob(&reference, &layer).await.unwrap().len() as i64,
        layer.size
    );
    layer.size = 10;
    let err = r.pull_blob(&reference, &layer).await.unwrap_err();
    assert!(
        format!("{err:?}").contains("larger than its descriptor"),
        "{err:?}"
    );
    layer.size = -1;
    let err = r.pull_blob(&reference, &layer).await.unwrap_err();
    assert!(matches!(err, OciError::InvalidManifest { .. }), "{err}");
}

#[test]
fn credentials_never_reach_the_logs() {
    let Some(private) = PrivateRegistry::start_secure() else {
        return;
    };
    let addr = private.addr.clone();
    let home = tempfile::tempdir().unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}"));
    let config = docker_config(
        home.path(),
        &format!(r#"{{"auths":{{"{addr}":{{"auth":"{auth}"}}}}}}"#),
    );
    let out = crate::support::devcell()
        .env("DEVCELL_LOG", "trace")
        .args(["features", "publish"])
        .arg(collection())
        .args(["-r", &addr, "-n", "logs", "--secure-registry", &addr])
        .arg("--extra-ca-certificate")
        .arg(private.ca_certificate())
        .arg("--docker-config")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.len() > 1000, "trace logging is on: {stderr}");
    for secret in [REGISTRY_PASSWORD, auth.as_str()] {
        assert!(!stderr.contains(secret), "secret in logs");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
    }
}

/// An OAuth2 identity token (`auths.<host>.identitytoken`) is exchanged at the registry's token
/// endpoint (`refresh_token` grant) for scoped access tokens, which a real registry with token
/// auth accepts for push and pull (spec-notes/0262).
#[test]
fn identity_token_is_exchanged_for_scoped_access_tokens() {
    let server = crate::support::TokenServer::start();
    let Some(private) = PrivateRegistry::start_with_token_server(&server) else {
        return;
    };
    let reg = private.addr.clone();
    let config_dir = tempfile::tempdir().unwrap();
    let write_config = |token: &str| {
        // As `docker login` stores an identity token: `auth` is `<token>:`.
        std::fs::write(
            config_dir.path().join("config.json"),
            serde_json::json!({"auths": {&reg: {"auth": "PHRva2VuPjo=", "identitytoken": token}}})
                .to_string(),
        )
        .unwrap();
    };
    let publish_with = |docker_config: Option<&Path>| {
        let mut cmd = crate::support::devcell();
        if let Some(dir) = docker_config {
            cmd.env("DOCKER_CONFIG", dir).env("DEVCELL_LOG", "trace");
        }
        cmd.args(["features", "publish"])
            .arg(collection().join("hello"))
            .args(["-r", &reg, "-n", "idtok"])
            .output()
            .unwrap()
    };

    // Without credentials the registry refuses.
    let err = crate::support::assert_failed(&publish_with(None));
    assert!(err.contains(&reg), "{err}");
    let anonymous_requests = server.requests().len();

    // With the identity token: push, then pull by tag through the fetcher.
    write_config(crate::support::TokenServer::REFRESH_TOKEN);
    let out = publish_with(Some(config_dir.path()));
    // Trace logging (devcell, oci-client, reqwest, hyper) never shows the identity token.
    let logs = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(logs.contains("TRACE") || logs.contains("DEBUG"), "{logs}");
    assert!(
        !logs.contains(crate::support::TokenServer::REFRESH_TOKEN),
        "identity token in the logs"
    );
    // …nor an access token (the JWTs the token server issues start with `eyJ`).
    assert!(!logs.contains("eyJ"), "access token in the logs");
    let published = crate::support::stdout_json(&out);
    let fetcher = |cache: &Path| {
        Fetcher::new(FetchOptions {
            cache_dir: Some(cache.to_owned()),
            offline: false,
            refresh_tags: false,
            registry: RegistryOptions {
                docker_config: Some(config_dir.path().join("config.json")),
                ..RegistryOptions::default()
            },
            allowed_hosts: None,
        })
        .unwrap()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let r = rt
        .block_on(fetcher(cache.path()).resolve_and_fetch(
            &oci(&format!("{reg}/idtok/hello:1")),
            &dest.path().join("h"),
        ))
        .unwrap();
    assert_eq!(
        r.integrity.as_deref(),
        published["hello"]["digest"].as_str()
    );
    assert!(dest.path().join("h/install.sh").is_file());

    // What reached the token endpoint: only refresh_token grants, scoped per repository and
    // operation, with devcell's client id and the registry's service.
    let exchanges = &server.requests()[anonymous_requests..];
    assert!(!exchanges.is_empty());
    let mut scopes = std::collections::BTreeSet::new();
    for e in exchanges {
        assert_eq!(e["method"], "POST", "{e}");
        assert_eq!(e["grant_type"], "refresh_token", "{e}");
        assert_eq!(e["client_id"], "devcell", "{e}");
        assert_eq!(e["service"], "devcell-test", "{e}");
        assert_eq!(e["refresh_token_ok"], true, "{e}");
        assert_eq!(e["authorization"], false, "{e}");
        scopes.insert(e["scope"].as_str().unwrap().to_string());
    }
    assert!(
        scopes.contains("repository:idtok/hello:pull,push"),
        "{scopes:?}"
    );
    assert!(scopes.contains("repository:idtok/hello:pull"), "{scopes:?}");

    // A wrong identity token: a clear error that never shows the token.
    write_config("wrong-identity-token-value");
    let cache = tempfile::tempdir().unwrap();
    let err = rt
        .block_on(fetcher(cache.path()).resolve_and_fetch(
            &oci(&format!("{reg}/idtok/hello:1")),
            &dest.path().join("w"),
        ))
        .unwrap_err();
    let mut shown = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(e) = source {
        shown.push_str(&format!(": {e}"));
        source = e.source();
    }
    assert!(
        shown.contains("cannot exchange the identity token"),
        "{shown}"
    );
    assert!(shown.contains("401"), "{shown}");
    assert!(!shown.contains("wrong-identity-token-value"), "{shown}");
}

/// Item 7 of issue 12 (spec-note 0451): a moved tag is seen on the next resolve (one manifest
/// request per run), `--offline` uses the cache and says so once, and a lockfile-pinned config
/// makes no request at all.
#[test]
fn moved_tag_is_revalidated_and_a_pinned_lockfile_makes_no_request() {
    let Some(private) = PrivateRegistry::start() else {
        return;
    };
    let reg = private.addr.clone();
    let ns = "moving/features";
    let v1 = publish(hello_at("1.0.0").path(), &reg, ns);
    let d1 = v1["hello"]["digest"].as_str().unwrap().to_owned();
    let ws = tempfile::tempdir().unwrap();
    let dc = ws.path().join(".devcontainer");
    std::fs::create_dir_all(&dc).unwrap();
    std::fs::write(
        dc.join("devcontainer.json"),
        format!(r#"{{"image": "x", "features": {{"{reg}/{ns}/hello:1": {{}}}}}}"#),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = |offline: bool| {
        let mut cmd = crate::support::devcell();
        cmd.args(["features", "resolve-dependencies", "--workspace-folder"])
            .arg(ws.path())
            .arg("--cache-dir")
            .arg(cache.path());
        if offline {
            cmd.arg("--offline");
        }
        let out = cmd.output().unwrap();
        let json = crate::support::stdout_json(&out);
        let id = json["installOrder"][0]["id"].as_str().unwrap().to_owned();
        (id, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let manifests = format!("/v2/{ns}/hello/manifests/");
    let tag_requests = || private.requests_containing(&format!("{manifests}1 "));

    let (first, _) = run(false);
    assert_eq!(first, format!("{reg}/{ns}/hello@{d1}"));
    let after_first = tag_requests();
    // The same unchanged tag again: revalidated with exactly one manifest request.
    let (second, _) = run(false);
    assert_eq!(second, first);
    assert_eq!(tag_requests(), after_first + 1);

    // A new release moves `:1`: the next resolve sees it and installs it.
    let v2 = publish(hello_at("1.1.0").path(), &reg, ns);
    let d2 = v2["hello"]["digest"].as_str().unwrap().to_owned();
    assert_ne!(d1, d2);
    let before = tag_requests();
    let (moved, _) = run(false);
    assert_eq!(moved, format!("{reg}/{ns}/hello@{d2}"));
    assert_eq!(tag_requests(), before + 1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let f = fetcher(cache.path(), RegistryOptions::default(), false);
    let dest = tempfile::tempdir().unwrap();
    let installed = rt
        .block_on(f.resolve_and_fetch(&oci(&format!("{reg}/{ns}/hello:1")), &dest.path().join("h")))
        .unwrap();
    assert_eq!(installed.version(), Some("1.1.0"));
    let meta: Value = serde_json::from_slice(
        &std::fs::read(dest.path().join("h/devcontainer-feature.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["version"], "1.1.0");

    // Offline: the cache answers, no request, and the output says so exactly once.
    let before = private.requests_containing(&manifests);
    let (offline, stderr) = run(true);
    assert_eq!(offline, moved);
    assert_eq!(private.requests_containing(&manifests), before);
    let warning = format!(
        "offline: Feature tags resolved from the cache, not revalidated against their registry: {reg}/{ns}/hello:1"
    );
    assert_eq!(stderr.matches(&warning).count(), 1, "{stderr}");

    // Pinned by a lockfile (to the old release): no request of any kind, the pin wins.
    std::fs::write(
        dc.join("devcontainer-lock.json"),
        serde_json::to_string_pretty(&serde_json::json!({"features": {
            format!("{reg}/{ns}/hello:1"): {
                "version": "1.0.0",
                "resolved": format!("{reg}/{ns}/hello@{d1}"),
                "integrity": d1,
            }
        }}))
        .unwrap(),
    )
    .unwrap();
    let everything = private.requests_containing("/v2/");
    let (pinned, stderr) = run(false);
    assert_eq!(pinned, first, "{stderr}");
    assert_eq!(private.requests_containing("/v2/"), everything, "{stderr}");
    assert!(!stderr.contains("revalidated"), "{stderr}");
}
