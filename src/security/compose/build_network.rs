//! The network every Compose service's image build gets when the project's network is closed
//! (spec-note 0442, attacks K8): devcell's own builds get `networkmode: none` from
//! [`crate::security::build_network::decide`], but `docker compose build` builds a service's
//! `build:` on the engine's default network unless the files say otherwise, so a Dockerfile
//! `RUN` step (the repository's, or one the agent wrote for the next handoff) could send the
//! workspace away during a handoff on `none`. [`closed_builds`] gives every service with a
//! `build` `build.network: none` in a file devcell adds after the repository's; what the
//! repository asks beyond that is a [`Permission::BuildNetwork`] request.

use serde_json::{Map, Value, json};

use super::fields::{services_of, strings_of};
use crate::security::policy::{Grants, Permission, PermissionRequest, RequestStatus, Source};
use crate::security::profile::SecurityProfile;

/// What [`closed_builds`] decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClosedBuilds {
    /// The [`Permission::BuildNetwork`] requests the services' builds make (refused without
    /// `--allow build-network`).
    pub requests: Vec<PermissionRequest>,
    /// `{<service>: {"build": {"network": "none"}}}` for every service with a `build`, as the
    /// `services` of a Compose file added after the repository's (empty when nothing changes).
    pub services: Map<String, Value>,
}

/// The cache types that move build content over the builder's network (`cache_from`,
/// `cache_to`); `local` (a host folder, judged as one) and `inline` (in the image) do not.
fn is_remote_cache(entry: &str) -> bool {
    let kind = entry
        .split(',')
        .find_map(|part| part.trim().strip_prefix("type="))
        // an entry without `type=` is an image reference: a registry cache
        .unwrap_or("registry");
    !matches!(kind.trim(), "local" | "inline")
}

/// The builds of every service of `model` (the resolved Compose model) when the project's
/// network is `closed` (`none`, `allowlist`) under `hardened`: each service with a `build`
/// gets `build.network: none`, unless the user grants `build-network`. A `build.network` of
/// the repository other than `none` (the host network is besides asked for as
/// `host-network` by the service judge), and a `cache_from`/`cache_to` of a remote type (`registry`, `gha`, `s3`,
/// `azblob`, an image reference), is a `build-network` request of that service: refused
/// without the grant, granted with it (and then the build keeps the repository's network).
/// `reference`, or an open network, changes nothing (Compose's own behaviour).
pub fn closed_builds(
    profile: &SecurityProfile,
    grants: &Grants,
    model: &Value,
    closed: bool,
) -> ClosedBuilds {
    let mut out = ClosedBuilds::default();
    if !closed || !matches!(profile, SecurityProfile::Hardened(_)) {
        return out;
    }
    let granted = grants.allows(&Permission::BuildNetwork);
    let status = if granted {
        RequestStatus::Granted
    } else {
        RequestStatus::Refused
    };
    for (name, service) in services_of(model) {
        let Some(build) = service.get("build").filter(|b| b.is_object()) else {
            continue;
        };
        for property in asked_properties(build) {
            let request = PermissionRequest {
                permission: Permission::BuildNetwork,
                source: Source::ComposeService {
                    service: name.clone(),
                    property: property.to_string(),
                },
                status,
            };
            if !out.requests.contains(&request) {
                out.requests.push(request);
            }
        }
        if !granted {
            out.services
                .insert(name.clone(), json!({"build": {"network": "none"}}));
        }
    }
    out
}

/// The properties of `build` that ask for a network under a closed project: `build.network`
/// (any but `none`; the host network, or a named one, is also its own request, from the
/// service judge), remote caches.
fn asked_properties(build: &Value) -> Vec<&'static str> {
    let mut asked = Vec::new();
    if let Some(network) = build.get("network").and_then(Value::as_str)
        && network != "none"
    {
        asked.push("build.network");
    }
    for (key, property) in [
        ("cache_from", "build.cache_from"),
        ("cache_to", "build.cache_to"),
    ] {
        if strings_of(build, key).iter().any(|e| is_remote_cache(e)) {
            asked.push(property);
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::profile::ProfileLimits;

    fn hardened() -> SecurityProfile {
        SecurityProfile::Hardened(ProfileLimits::default())
    }

    fn model() -> Value {
        json!({"services": {
            "app": {"build": {"context": "/w/repo", "dockerfile": "Dockerfile"}},
            "worker": {"build": {"context": "/w/repo/worker"}, "image": "w:1"},
            "db": {"image": "postgres:16"},
        }})
    }

    #[test]
    fn a_closed_network_builds_every_service_without_one() {
        let none = json!({"build": {"network": "none"}});
        let closed = closed_builds(&hardened(), &Grants::default(), &model(), true);
        assert!(closed.requests.is_empty(), "{:?}", closed.requests);
        assert_eq!(closed.services.len(), 2, "{:?}", closed.services);
        assert_eq!(closed.services["app"], none);
        assert_eq!(closed.services["worker"], none);
        assert!(closed.services.get("db").is_none());
        // an open network, or `reference`, keeps Compose's default build network
        assert_eq!(
            closed_builds(&hardened(), &Grants::default(), &model(), false),
            ClosedBuilds::default()
        );
        assert_eq!(
            closed_builds(
                &SecurityProfile::Reference,
                &Grants::default(),
                &model(),
                true
            ),
            ClosedBuilds::default()
        );
        // `--allow build-network` gives the builds Compose's default back
        let grants = Grants::parse(&["build-network".to_string()]).unwrap();
        let open = closed_builds(&hardened(), &grants, &model(), true);
        assert!(open.services.is_empty());
        assert!(open.requests.is_empty());
    }

    #[test]
    fn a_repository_build_network_or_remote_cache_under_a_closed_network_is_a_request() {
        let model = json!({"services": {
            "app": {"build": {"context": "/w/repo", "network": "default"}},
            "side": {"build": {"context": "/w/repo", "network": "none",
                "cache_from": ["type=local,src=/w/repo/.cache", "user/app:cache"],
                "cache_to": ["type=gha", "type=inline"]}},
            "quiet": {"build": {"context": "/w/repo", "cache_to": ["type=local,dest=/w/c"]}},
        }});
        let closed = closed_builds(&hardened(), &Grants::default(), &model, true);
        let asked: Vec<(String, String, RequestStatus)> = closed
            .requests
            .iter()
            .map(|r| match &r.source {
                Source::ComposeService { service, property } => {
                    assert_eq!(r.permission, Permission::BuildNetwork);
                    (service.clone(), property.clone(), r.status)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        let refused = RequestStatus::Refused;
        assert_eq!(
            asked,
            vec![
                ("app".into(), "build.network".into(), refused),
                ("side".into(), "build.cache_from".into(), refused),
                ("side".into(), "build.cache_to".into(), refused),
            ]
        );
        assert!(crate::security::policy::refusal(&hardened(), &closed.requests).is_some());
        // granted: reported as granted, and the builds keep the repository's network
        let grants = Grants::parse(&["build-network".to_string()]).unwrap();
        let granted = closed_builds(&hardened(), &grants, &model, true);
        assert_eq!(granted.requests.len(), 3);
        assert!(
            granted
                .requests
                .iter()
                .all(|r| r.status == RequestStatus::Granted)
        );
        assert!(granted.services.is_empty());
    }

    #[test]
    fn remote_cache_types_are_told_from_local_ones() {
        for remote in [
            "user/app:cache",
            "type=registry,ref=r/app:c",
            "type=gha",
            "type=s3,region=x",
            "type=azblob,name=c",
        ] {
            assert!(is_remote_cache(remote), "{remote}");
        }
        for local in ["type=local,src=/c", "type=inline", " type=local ,dest=/c"] {
            assert!(!is_remote_cache(local), "{local}");
        }
    }
}
