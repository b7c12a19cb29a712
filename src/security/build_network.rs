//! The network image builds get (spec-note 0442): a container whose network is `none` is
//! built without one too, so a Dockerfile `RUN` step, a Feature's `install.sh` or the
//! `updateRemoteUserUID` layer cannot reach what the container cannot (the engine's build API
//! `networkmode`).

use super::policy::{Grants, Permission, PermissionRequest, RequestStatus, Source};
use super::profile::SecurityProfile;

/// What [`decide`] chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildNetwork {
    /// The network mode for every build (`None`: the engine's default network).
    pub network: Option<String>,
    /// The [`Permission::BuildNetwork`] request, when there is one: the configuration asks for
    /// a build network (`build.options --network`), or the user granted one.
    pub request: Option<PermissionRequest>,
}

/// The builds' network for a container on `container_network` (`None`: the engine's
/// default), the configuration's `build.options --network` being `configured`:
///
/// - `reference`, or a container with a network: the configured one (the reference CLI's
///   behaviour; plain `up` keeps the default build network);
/// - `hardened` and a container on `none`: `none`, unless `--allow build-network`. A
///   configured network other than `none` is then a request from devcontainer.json (refused
///   without the grant); the grant alone gives the engine's default network and is reported
///   as a request from the command line.
pub fn decide(
    profile: &SecurityProfile,
    grants: &Grants,
    container_network: Option<&str>,
    configured: Option<&str>,
) -> BuildNetwork {
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    if !hardened || container_network != Some("none") {
        return BuildNetwork {
            network: configured.map(str::to_string),
            request: None,
        };
    }
    let granted = grants.allows(&Permission::BuildNetwork);
    let request = |source, status| {
        Some(PermissionRequest {
            permission: Permission::BuildNetwork,
            source,
            status,
        })
    };
    match configured.filter(|n| *n != "none") {
        Some(asked) => BuildNetwork {
            network: Some(if granted { asked } else { "none" }.to_string()),
            request: request(
                Source::DevcontainerJson,
                if granted {
                    RequestStatus::Granted
                } else {
                    RequestStatus::Refused
                },
            ),
        },
        None if granted => BuildNetwork {
            network: None,
            request: request(Source::CommandLine, RequestStatus::Granted),
        },
        None => BuildNetwork {
            network: Some("none".to_string()),
            request: None,
        },
    }
}

/// The network an image build judges itself against when it runs without a container
/// (`devcell build`): under `hardened` `none` (so [`decide`] builds without a network unless
/// `--allow build-network`), under `reference` `None` (the configuration's own, as the
/// reference CLI).
pub fn of_a_build(profile: &SecurityProfile) -> Option<crate::settings::NetworkMode> {
    matches!(profile, SecurityProfile::Hardened(_)).then_some(crate::settings::NetworkMode::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_have_the_containers_network() {
        let hardened = SecurityProfile::default();
        let none = Grants::default();
        let granted = Grants::parse(&["build-network"]).unwrap();
        // plain `up`: the default build network, as the reference
        assert_eq!(decide(&hardened, &none, None, None).network, None);
        assert_eq!(
            decide(&hardened, &none, Some("default"), None).network,
            None
        );
        assert_eq!(
            decide(&hardened, &none, None, Some("host"))
                .network
                .as_deref(),
            Some("host")
        );
        // a handoff on `none`: none, unless granted
        let d = decide(&hardened, &none, Some("none"), None);
        assert_eq!((d.network.as_deref(), d.request), (Some("none"), None));
        let d = decide(&hardened, &granted, Some("none"), None);
        assert_eq!(d.network, None);
        let r = d.request.unwrap();
        assert_eq!(
            (r.source, r.status),
            (Source::CommandLine, RequestStatus::Granted)
        );
        assert_eq!(r.permission.grant_flag().unwrap(), "--allow build-network");
        // the configuration asking for one is a request
        let d = decide(&hardened, &none, Some("none"), Some("default"));
        assert_eq!(d.network.as_deref(), Some("none"));
        assert_eq!(d.request.unwrap().status, RequestStatus::Refused);
        let d = decide(&hardened, &granted, Some("none"), Some("default"));
        assert_eq!(d.network.as_deref(), Some("default"));
        assert_eq!(d.request.unwrap().status, RequestStatus::Granted);
        let d = decide(&hardened, &none, Some("none"), Some("none"));
        assert_eq!((d.network.as_deref(), d.request), (Some("none"), None));
        // reference: as configured
        let d = decide(
            &SecurityProfile::Reference,
            &none,
            Some("none"),
            Some("default"),
        );
        assert_eq!((d.network.as_deref(), d.request), (Some("default"), None));
    }
}
