//! L0: label keys, environment variable names and media types, each defined once with its source.

/// Image/container label holding the image metadata entries
/// ([spec: image metadata](https://containers.dev/implementors/spec/#image-metadata)).
pub const METADATA_LABEL: &str = "devcontainer.metadata";
/// Container id label with the host workspace folder (reference CLI).
pub const LOCAL_FOLDER_LABEL: &str = "devcontainer.local_folder";
/// Container id label with the config file path (reference CLI).
pub const CONFIG_FILE_LABEL: &str = "devcontainer.config_file";
/// Image label naming the base image a locally built image was built from, as
/// `<repository>@sha256:<digest>`; the audit counts such an image as pinned (spec-notes 0145,
/// 0250).
pub const BASE_IMAGE_LABEL: &str = "devcell.base_image";
/// Container label with the remote user's numeric uid as the container's `/etc/passwd` had it
/// at creation (decimal), so a reused container's ownership check needs no file read
/// (spec-note 0324).
pub const REMOTE_UID_LABEL: &str = "devcell.remote_uid";
/// The non-root user devcell provides under `hardened` when the image runs as root and the
/// configuration names no user (spec-note 0188): created in the cached uid layer, with a home
/// folder, named for who made it (no image the tests or the reference use has a user by this
/// name; `vscode`, `node`, `ubuntu`, `agent` are common ones).
pub const PROVIDED_USER: &str = "devcell";
/// Container label with the name of the user devcell provided (spec-note 0188), so a reused
/// container's result says so too. In devcell's label namespace: an image cannot carry it
/// into a container (spec-note 0421).
pub const PROVIDED_USER_LABEL: &str = "devcell.provided_user";
/// Container label with the security profile (`hardened`, `reference`) devcell created the
/// container under. In devcell's label namespace, which no image or configuration can set
/// (spec-note 0421): its presence marks a container devcell created (`handoff --container`,
/// spec-note 0521).
pub const PROFILE_LABEL: &str = "devcell.profile";
/// Container label with the user a `hardened` container was asked to run as, as the
/// configuration or image named it (`""`: the image's `USER`), while the container itself is
/// created as numeric `uid:gid` (so its main process gets no supplementary group from the
/// image's `/etc/group`; spec-note 0400, "the image's groups"). Readers of the container's user
/// (the `remoteUser` default, the user checks) read this name, so nothing they report changes.
/// In devcell's label namespace (spec-note 0421); read only on a container whose
/// [`PROFILE_LABEL`] is `hardened`.
pub const CREATED_USER_LABEL: &str = "devcell.user";
/// Container label with the `sha256:<hex>` of the `devcontainer.json` a container was created
/// from: `handoff --container` refuses a container whose configuration changed since
/// (spec-note 0521).
pub const CONFIG_SHA256_LABEL: &str = "devcell.config_sha256";
/// Container label `allowlist` on a container `up --network allowlist` created: its network
/// `none` has devcell's egress channel and host-side proxy (spec-note 0502).
pub const EGRESS_NETWORK_LABEL: &str = "devcell.network";
/// Container label with the host variables `up` let cross under `hardened` (granted names,
/// sorted, comma-separated; empty when none): `exec` and `run-user-commands` re-reading the
/// configuration may use no other (spec-note 0443). Its presence marks a container devcell
/// created under `hardened`.
pub const HOST_ENV_LABEL: &str = "devcell.host_env";
/// Volume label with the host workspace folder a named volume was created for by devcell
/// (`up` under `hardened` creates the missing named volumes a configuration mounts): an
/// existing volume without it, or for another folder, is a permission request (spec-note 0444).
pub const VOLUME_WORKSPACE_LABEL: &str = "devcell.volume_workspace";

/// Container label with a value unique to one creation (`<pid>-<nanos>-<hash>`): devcell
/// finds the primary container `docker compose up` made by it, not by the project's labels,
/// which another container can carry too (one slipped in while `--remove-existing-container`
/// replaced the primary, or one whose image forged them). In devcell's label namespace, which
/// no image or configuration can set (spec-note 0421).
pub const CREATION_LABEL: &str = "devcell.creation";

/// Container label: the id labels devcell created the container under (a JSON object, keys
/// sorted), so a lookup by a user's own `--id-label` finds only a container devcell made for
/// those labels, never another workspace's dev container whose `runArgs` or Compose `labels`
/// gave it the same key (attack 31, M3; spec-note 0421). In devcell's label namespace.
pub const ID_LABELS_LABEL: &str = "devcell.id_labels";

/// Label namespaces devcell and the reference CLI identify containers by (the id labels
/// above, `devcontainer.metadata`, `devcell.*` evidence labels, the reference's
/// `devcontainer.is_test_run`): a repository may not set any key in them (spec-note 0421).
pub const IDENTITY_LABEL_PREFIXES: &[&str] = &["devcontainer.", "devcell."];

/// Whether `key` is in one of the [`IDENTITY_LABEL_PREFIXES`] (ASCII case-insensitive, so a
/// spelling an engine or a later reader might fold is covered too).
pub fn is_identity_label(key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    IDENTITY_LABEL_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// The remote user's uid recorded in [`REMOTE_UID_LABEL`] on a container's `labels`: the
/// decimal digits devcell writes, nothing else (no sign, space or other base: a value devcell
/// did not write is no uid). `None` when absent or not such a number.
pub fn remote_uid(labels: &std::collections::BTreeMap<String, String>) -> Option<u32> {
    let value = labels.get(REMOTE_UID_LABEL)?;
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_uid_label_is_decimal_digits_only() {
        let labels = |v: &str| {
            std::collections::BTreeMap::from([(REMOTE_UID_LABEL.to_string(), v.to_string())])
        };
        assert_eq!(remote_uid(&labels("1000")), Some(1000));
        assert_eq!(remote_uid(&labels("0")), Some(0));
        // `u32::from_str` takes a sign; devcell never writes one
        for bad in [
            "+1000",
            "-1",
            " 1000",
            "1000 ",
            "",
            "0x3e8",
            "4294967296",
            "abc",
        ] {
            assert_eq!(remote_uid(&labels(bad)), None, "{bad:?}");
        }
        assert_eq!(remote_uid(&std::collections::BTreeMap::new()), None);
    }
}
