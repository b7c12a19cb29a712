//! Host environment that a configuration sends into the container (spec-note 0440).
//!
//! `${localEnv:NAME}` is substituted on the host, so whatever a repository names there
//! (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`) reaches the container's config, a build's
//! arguments (and so the image history), a label or a mount; `runArgs -e NAME` and a bare
//! `build.options --build-arg NAME` make the engine copy the host's value the same way. Under
//! `hardened` each such variable is a request, [`Permission::HostEnv`], granted only by the
//! user with `--allow env:NAME`, and judged from what substitution recorded
//! ([`crate::config::substitute::HostEnvReads`]), never by parsing strings again.
//!
//! A few names that are not secrets and that configurations commonly use
//! ([`NON_SECRET_NAMES`]: `${localEnv:HOME}` in a mount source, `${localEnv:USER}`) cross
//! without a grant and are still reported, with status `allowedByProfile`. The mount such a
//! path makes is judged on its own (a host path outside the workspace is a request).
//!
//! Pure: no environment, file system or engine access; the caller passes the environment.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::config::substitute::HostEnvReads;

use super::error::{Result, SecurityError};
use super::policy::{Grants, Permission, PermissionRequest, RequestStatus, Source};
use super::profile::SecurityProfile;

/// Host variables that cross into the container under `hardened` without a grant: they name
/// the host user and its home folder, which a mount or a user name needs and which are not
/// secrets. Still reported (`allowedByProfile`).
pub const NON_SECRET_NAMES: &[&str] = &["HOME", "USER", "LOGNAME"];

/// The property of a bare `runArgs -e NAME` / `--env NAME` (the engine copies the host value).
pub const RUN_ARGS_PROPERTY: &str = "runArgs";

/// The property of a bare `build.options --build-arg NAME`.
pub const BUILD_OPTIONS_PROPERTY: &str = "build.options";

/// One host variable that would cross, and where to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostEnvUse {
    /// The variable's name (never its value).
    pub name: String,
    /// The properties whose value it goes into: `containerEnv.TOKEN`, `mounts[0]`,
    /// `build.args.KEY`, `runArgs`, …
    pub properties: Vec<String>,
    /// Whether it is a build argument: build arguments persist in the image's history.
    pub persists_in_image: bool,
}

/// Whether a property path belongs to `initializeCommand`, which runs on the host: its text
/// never reaches the container (host commands are judged as such, not here).
fn is_host_only(property: &str) -> bool {
    property
        .strip_prefix("initializeCommand")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

fn is_build_argument(property: &str) -> bool {
    property.starts_with("build.args") || property.starts_with(BUILD_OPTIONS_PROPERTY)
}

/// Every host variable that would cross into the container, by name: the `${localEnv:…}`
/// reads of the substituted configuration (`reads`, `initializeCommand` left out) and the
/// `(property, name)` pairs of the bare forms the engine resolves itself (`runArgs -e NAME`,
/// `--build-arg NAME`). Sorted by name.
pub fn uses(reads: &HostEnvReads, bare: &[(String, String)]) -> Vec<HostEnvUse> {
    let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (property, names) in reads.iter().filter(|(p, _)| !is_host_only(p)) {
        for name in names {
            by_name
                .entry(name.clone())
                .or_default()
                .insert(property.clone());
        }
    }
    for (property, name) in bare {
        by_name
            .entry(name.clone())
            .or_default()
            .insert(property.clone());
    }
    by_name
        .into_iter()
        .map(|(name, properties)| HostEnvUse {
            persists_in_image: properties.iter().any(|p| is_build_argument(p)),
            name,
            properties: properties.into_iter().collect(),
        })
        .collect()
}

/// One [`Permission::HostEnv`] request per use, judged: `reference` → `allowedByProfile`;
/// `hardened` → `granted` with `--allow env:NAME`, else `allowedByProfile` for a
/// [`NON_SECRET_NAMES`] name, else `refused`.
pub fn judge(
    profile: &SecurityProfile,
    grants: &Grants,
    uses: &[HostEnvUse],
) -> Vec<PermissionRequest> {
    uses.iter()
        .map(|u| {
            grants.judge_devcontainer_json(
                profile,
                Permission::HostEnv(u.name.clone()),
                NON_SECRET_NAMES.contains(&u.name.as_str()),
            )
        })
        .collect()
}

/// [`SecurityError::Refused`] listing every request when any of `requests` is refused (the
/// caller then reads, builds and creates nothing); `Ok` otherwise.
///
/// # Errors
/// As described.
pub fn check(profile: &SecurityProfile, requests: &[PermissionRequest]) -> Result<()> {
    if requests.iter().any(|r| r.status == RequestStatus::Refused) {
        return Err(SecurityError::Refused {
            profile: profile.name().to_string(),
            requests: requests.to_vec(),
        });
    }
    Ok(())
}

/// The environment substitution and the engine may read: under `hardened`, only the granted
/// names and [`NON_SECRET_NAMES`] (a variable the policy did not judge resolves as unset, so
/// no other path can copy it); under `reference`, all of `env`.
pub fn visible_env(
    profile: &SecurityProfile,
    grants: &Grants,
    env: &HashMap<String, String>,
) -> HashMap<String, String> {
    match profile {
        SecurityProfile::Reference => env.clone(),
        SecurityProfile::Hardened(_) => env
            .iter()
            .filter(|(name, _)| {
                grants.env.contains(*name) || NON_SECRET_NAMES.contains(&name.as_str())
            })
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect(),
    }
}

/// The host variables the `devcontainer.metadata` label of an image built from the
/// repository's Dockerfile names (`reads`, its `${localEnv:…}` reads: the label is the
/// repository's, spec-note 0443), judged like devcontainer.json's ([`judge`]), their source
/// [`Source::ImageMetadata`]: the uses (properties under the label's name,
/// `devcontainer.metadata[0].remoteEnv.TOKEN`) and the requests. `up`, `build` and
/// `handoff --plan` judge the label with this one function.
pub fn image_label(
    profile: &SecurityProfile,
    grants: &Grants,
    reads: &HostEnvReads,
) -> (Vec<HostEnvUse>, Vec<PermissionRequest>) {
    let label = crate::names::METADATA_LABEL;
    let reads: HostEnvReads = reads
        .iter()
        .map(|(property, names)| (format!("{label}{property}"), names.clone()))
        .collect();
    let uses = uses(&reads, &[]);
    let mut requests = judge(profile, grants, &uses);
    for r in &mut requests {
        r.source = Source::ImageMetadata;
    }
    (uses, requests)
}

/// `more` merged into `into` by name (properties joined, sorted; a build argument in either
/// persists), so one list names every host variable that crosses (the `hostEnv` of `up`'s
/// result and of the plan).
pub fn merge(into: &mut Vec<HostEnvUse>, more: Vec<HostEnvUse>) {
    for u in more {
        match into.iter_mut().find(|i| i.name == u.name) {
            Some(i) => {
                for p in u.properties {
                    if !i.properties.contains(&p) {
                        i.properties.push(p);
                    }
                }
                i.properties.sort();
                i.persists_in_image |= u.persists_in_image;
            }
            None => into.push(u),
        }
    }
    into.sort_by(|a, b| a.name.cmp(&b.name));
}

/// What an image build (`devcell build`, which runs no container) sends across, from `up`'s
/// judgement of the same configuration (`uses`, `requests`): the uses without `runArgs -e
/// NAME`, which only a container reads (a use left without a property is dropped), and the
/// requests with the [`Permission::HostEnv`] ones judged again for those uses ([`judge`]),
/// the others kept.
pub fn for_build(
    profile: &SecurityProfile,
    grants: &Grants,
    uses: &[HostEnvUse],
    requests: &[PermissionRequest],
) -> (Vec<HostEnvUse>, Vec<PermissionRequest>) {
    let kept: Vec<HostEnvUse> = uses
        .iter()
        .filter_map(|u| {
            let properties: Vec<String> = u
                .properties
                .iter()
                .filter(|p| p.as_str() != RUN_ARGS_PROPERTY)
                .cloned()
                .collect();
            (!properties.is_empty()).then(|| HostEnvUse {
                properties,
                ..u.clone()
            })
        })
        .collect();
    let mut judged = judge(profile, grants, &kept);
    judged.extend(
        requests
            .iter()
            .filter(|r| !matches!(r.permission, Permission::HostEnv(_)))
            .cloned(),
    );
    (kept, judged)
}

/// The warning for the build arguments among `uses` that cross (not refused): their values
/// are stored in the image's history (`docker history`), readable by anyone who can read the
/// image. `None` when there is none.
pub fn image_history_warning(
    uses: &[HostEnvUse],
    requests: &[PermissionRequest],
) -> Option<String> {
    let names: Vec<&str> = uses
        .iter()
        .filter(|u| u.persists_in_image)
        .filter(|u| {
            requests.iter().any(|r| {
                r.permission == Permission::HostEnv(u.name.clone())
                    && r.status != RequestStatus::Refused
            })
        })
        .map(|u| u.name.as_str())
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "host variable(s) {} go into build arguments: their values persist in the image's history (`docker history`); pass secrets with `--secrets-file` instead",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(pairs: &[(&str, &[&str])]) -> HostEnvReads {
        pairs
            .iter()
            .map(|(p, names)| (p.to_string(), names.iter().map(|n| n.to_string()).collect()))
            .collect()
    }

    fn hardened() -> SecurityProfile {
        SecurityProfile::default()
    }

    #[test]
    fn uses_merge_reads_and_bare_names_and_skip_initialize_command() {
        let r = reads(&[
            ("containerEnv.TOKEN", &["GH_TOKEN"]),
            ("mounts[0]", &["HOME"]),
            ("build.args.K", &["GH_TOKEN", "NPM_TOKEN"]),
            ("initializeCommand", &["HOST_ONLY"]),
            ("initializeCommand[1]", &["HOST_ONLY"]),
            ("initializeCommandX", &["NOT_HOST"]),
        ]);
        let bare = [
            (RUN_ARGS_PROPERTY.to_string(), "AWS_KEY".to_string()),
            (BUILD_OPTIONS_PROPERTY.to_string(), "PIP_TOKEN".to_string()),
        ];
        let u = uses(&r, &bare);
        let names: Vec<&str> = u.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AWS_KEY",
                "GH_TOKEN",
                "HOME",
                "NOT_HOST",
                "NPM_TOKEN",
                "PIP_TOKEN"
            ]
        );
        let gh = &u[1];
        assert_eq!(gh.properties, ["build.args.K", "containerEnv.TOKEN"]);
        assert!(gh.persists_in_image);
        assert!(!u[0].persists_in_image && u[5].persists_in_image);
    }

    #[test]
    fn hardened_refuses_secrets_grants_them_and_lets_non_secret_names_cross() {
        let u = uses(
            &reads(&[("containerEnv.T", &["GH_TOKEN"]), ("mounts[0]", &["HOME"])]),
            &[],
        );
        let r = judge(&hardened(), &Grants::default(), &u);
        assert_eq!(r[0].permission, Permission::HostEnv("GH_TOKEN".into()));
        assert_eq!(r[0].status, RequestStatus::Refused);
        assert_eq!(
            r[0].permission.grant_flag().unwrap(),
            "--allow env:GH_TOKEN"
        );
        assert_eq!(r[1].status, RequestStatus::AllowedByProfile);
        let err = check(&hardened(), &r).unwrap_err();
        assert!(err.to_string().contains("`GH_TOKEN`"), "{err}");
        let hint = crate::diagnostics::Hint::hint(&err).unwrap();
        assert!(hint.contains("--allow env:GH_TOKEN"), "{hint}");

        let granted = Grants::parse(&["env:GH_TOKEN"]).unwrap();
        let r = judge(&hardened(), &granted, &u);
        assert_eq!(r[0].status, RequestStatus::Granted);
        assert!(check(&hardened(), &r).is_ok());
        let json = serde_json::to_value(&r[0]).unwrap();
        assert_eq!(json["permission"], "hostEnv");
        assert_eq!(json["value"], "GH_TOKEN");
        assert_eq!(json["grant"], "--allow env:GH_TOKEN");

        let r = judge(&SecurityProfile::Reference, &Grants::default(), &u);
        assert!(
            r.iter()
                .all(|r| r.status == RequestStatus::AllowedByProfile)
        );
    }

    #[test]
    fn visible_env_keeps_only_granted_and_non_secret_names_under_hardened() {
        let env: HashMap<String, String> = [("HOME", "/h"), ("GH_TOKEN", "s"), ("OTHER", "o")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let seen = visible_env(&hardened(), &Grants::default(), &env);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen["HOME"], "/h");
        let seen = visible_env(
            &hardened(),
            &Grants::parse(&["env:GH_TOKEN"]).unwrap(),
            &env,
        );
        assert_eq!(seen.len(), 2);
        assert_eq!(seen["GH_TOKEN"], "s");
        assert_eq!(
            visible_env(&SecurityProfile::Reference, &Grants::default(), &env),
            env
        );
    }

    #[test]
    fn build_arguments_that_cross_are_called_out() {
        let u = uses(&reads(&[("build.args.K", &["NPM_TOKEN"])]), &[]);
        let refused = judge(&hardened(), &Grants::default(), &u);
        assert_eq!(image_history_warning(&u, &refused), None);
        let granted = judge(&hardened(), &Grants::parse(&["env:NPM_TOKEN"]).unwrap(), &u);
        let w = image_history_warning(&u, &granted).unwrap();
        assert!(w.contains("`NPM_TOKEN`") && w.contains("history"), "{w}");
    }

    #[test]
    fn env_and_build_network_grants_parse() {
        let g = Grants::parse(&["env:GH_TOKEN", "build-network"]).unwrap();
        assert!(g.allows(&Permission::HostEnv("GH_TOKEN".into())));
        assert!(!g.allows(&Permission::HostEnv("OTHER".into())));
        assert!(g.allows(&Permission::BuildNetwork));
        for bad in ["env:", "env:A=B", "build-network:x"] {
            assert!(Grants::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_image_label_is_judged_like_the_configuration_under_its_own_name() {
        let r = reads(&[
            ("[0].remoteEnv.T", &["GH_TOKEN"]),
            ("[1].mounts[0]", &["HOME"]),
        ]);
        let (u, requests) = image_label(&hardened(), &Grants::default(), &r);
        assert_eq!(u[0].name, "GH_TOKEN");
        assert_eq!(u[0].properties, ["devcontainer.metadata[0].remoteEnv.T"]);
        assert_eq!(requests[0].source, Source::ImageMetadata);
        assert_eq!(requests[0].status, RequestStatus::Refused);
        assert_eq!(requests[1].status, RequestStatus::AllowedByProfile);

        let mut all = uses(&reads(&[("containerEnv.A", &["GH_TOKEN", "A"])]), &[]);
        merge(&mut all, u);
        let names: Vec<&str> = all.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["A", "GH_TOKEN", "HOME"]);
        assert_eq!(
            all[1].properties,
            ["containerEnv.A", "devcontainer.metadata[0].remoteEnv.T"]
        );
    }

    #[test]
    fn a_build_does_not_read_run_args() {
        let bare = [
            (RUN_ARGS_PROPERTY.to_string(), "ONLY_RUN".to_string()),
            (RUN_ARGS_PROPERTY.to_string(), "BOTH".to_string()),
        ];
        let u = uses(&reads(&[("build.args.K", &["BOTH"])]), &bare);
        let other = PermissionRequest {
            permission: Permission::BuildNetwork,
            source: Source::DevcontainerJson,
            status: RequestStatus::Refused,
        };
        let mut all = judge(&hardened(), &Grants::default(), &u);
        all.push(other.clone());
        let (b, requests) = for_build(&hardened(), &Grants::default(), &u, &all);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].name, "BOTH");
        assert_eq!(b[0].properties, ["build.args.K"]);
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].permission, Permission::HostEnv("BOTH".into()));
        assert_eq!(requests[1], other);
    }
}
