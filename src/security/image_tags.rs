//! Tags a repository gives the image it builds (`build.options --tag`/`-t`). The engine moves
//! a tag to the newest image given it, so a repository naming `node:20` or another workspace's
//! image would have every configuration that names that tag run the repository's image, with
//! that configuration's grants. Under `hardened` each such tag is a request (`--allow
//! image-tag:NAME`); devcell's own `vsc-…` name is not the repository's (spec-note 0400).

use super::policy::{Grants, Permission, PermissionRequest, RequestStatus, Source};
use super::profile::SecurityProfile;

/// One request per tag in `tags` (the tags `build.options` asked for, devcell's own name
/// excluded): `Refused` under `hardened` unless granted, none under `reference` (the reference
/// CLI passes `build.options` to `docker build` as written).
pub fn judge(
    profile: &SecurityProfile,
    grants: &Grants,
    tags: &[String],
) -> Vec<PermissionRequest> {
    if matches!(profile, SecurityProfile::Reference) {
        return Vec::new();
    }
    let mut out: Vec<PermissionRequest> = Vec::new();
    for tag in tags {
        let permission = Permission::ImageTag(tag.clone());
        if out.iter().any(|r| r.permission == permission) {
            continue;
        }
        let status = if grants.allows(&permission) {
            RequestStatus::Granted
        } else {
            RequestStatus::Refused
        };
        out.push(PermissionRequest {
            permission,
            source: Source::DevcontainerJson,
            status,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_tags_are_requests_under_hardened_only() {
        let hardened = SecurityProfile::default();
        let tags = vec!["node:20".to_string(), "node:20".to_string()];
        let r = judge(&hardened, &Grants::default(), &tags);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].status, RequestStatus::Refused);
        assert_eq!(
            r[0].permission.grant_flag().unwrap(),
            "--allow image-tag:node:20"
        );
        let granted = Grants::parse(&["image-tag:node:20"]).unwrap();
        assert_eq!(
            judge(&hardened, &granted, &tags)[0].status,
            RequestStatus::Granted
        );
        assert!(judge(&SecurityProfile::Reference, &Grants::default(), &tags).is_empty());
        assert!(Grants::parse(&["image-tag:"]).is_err());
    }
}
