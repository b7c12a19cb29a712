//! What the user granted: [`Grants`], parsed from `--allow` values (or the user config's
//! `allow` list), never from the repository.

use std::collections::BTreeSet;

use super::network::{network_permission, split_publish_grant};
use super::paths::{is_within, normalize_path};
use crate::security::error::{Result, SecurityError};
use crate::security::known::normalize_cap;
use crate::security::permissions::{Permission, PermissionRequest, RequestStatus, Source};
use crate::security::profile::SecurityProfile;

/// Permissions the user granted (`--allow`, repeatable, or the user config's `allow` list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// `privileged`.
    pub privileged: bool,
    /// `root`.
    pub root: bool,
    /// `network:host`.
    pub host_network: bool,
    /// `cap:<NAME>` (normalised).
    pub capabilities: BTreeSet<String>,
    /// `mount:<host path>` (normalised); grants that path and everything under it.
    pub mounts: BTreeSet<String>,
    /// `security-opt:<option>`.
    pub security_opts: BTreeSet<String>,
    /// `device:<host path>`.
    pub devices: BTreeSet<String>,
    /// `network:<container:x | name>` (`network:host` is [`Grants::host_network`]).
    pub networks: BTreeSet<String>,
    /// `publish:<ip>:<port>`, `publish:<ip>:*` (any port on that address), `publish:*`.
    pub publish: BTreeSet<String>,
    /// `host-command`: every command the repository names for the host runs (the command
    /// line's `--allow` only: a standing grant names its command, [`Grants::host_commands`]).
    pub host_command: bool,
    /// `host-command:sha256:<hex>`: the one host command whose
    /// [`crate::security::permissions::HostCommand::digest`] this is (lowercase hex): its
    /// text and the content of the workspace files it names.
    pub host_commands: BTreeSet<String>,
    /// `gitdir:<host path>` (normalised); grants that git directory and everything under it.
    pub git_dirs: BTreeSet<String>,
    /// `env:<NAME>`: host variables the configuration may send into the container.
    pub env: BTreeSet<String>,
    /// `build-network`: image builds keep a network when the container has none.
    pub build_network: bool,
    /// `namespace:<kind>:<mode>` (`namespace:pid:host`).
    pub namespaces: BTreeSet<String>,
    /// `device-cgroup-rule:<rule>`.
    pub device_cgroup_rules: BTreeSet<String>,
    /// `runtime-option:<key>=<value>` (`runtime-option:runtime=runsc`).
    pub runtime_options: BTreeSet<String>,
    /// `volume:<name>`: existing volumes devcell did not create for this workspace.
    pub volumes: BTreeSet<String>,
    /// `egress:<host[:port][=address]>`: destinations the repository requested, as written
    /// by the user; matched against a request's normalised entry (`host:port[=address]`,
    /// port 443 when not given).
    pub egress: BTreeSet<String>,
    /// `image-tag:<reference>`: tags the configuration's `build.options` give the built image.
    pub image_tags: BTreeSet<String>,
    /// `build-context:<url>`: build contexts the engine fetches from the network, by URL.
    pub build_contexts: BTreeSet<String>,
    /// `compose-file:<host path>` (normalised; grants that path and everything under it), or
    /// a path written with `${…}` (granted exactly as written).
    pub compose_files: BTreeSet<String>,
    /// `gpu`: every GPU of the host (also `device:gpu`, the Compose service's request).
    pub gpu: bool,
    /// `uncovered-git:<workspace-relative path>`: a handoff goes on although devcell cannot
    /// cover that `.git` entry below the workspace (or that folder it could not list), leaving
    /// it writable by the container; `uncovered-git:*` for every one, and for a walk cut at
    /// its bound (`handoff::nested_git`, spec-note 0400).
    pub uncovered_git: BTreeSet<String>,
    /// `registry:<host[:port]>` (lowercased): a registry host fetched from under a closed
    /// network that the committed configuration does not name (attack K12).
    pub registries: BTreeSet<String>,
    /// `workspace-git:rw`: a plain `up` under `hardened` leaves the workspace's git
    /// directories writable by the container, as the `reference` profile does (a lifecycle
    /// hook can then write `.git/config`, which the host's git runs; spec-note 0446).
    pub workspace_git_rw: bool,
    /// `created-git:<workspace-relative path>`: a git entry an agent created that the user
    /// checked and accepts: a handoff takes it as one of the workspace's repositories again
    /// (`handoff::git_identity::CreatedGits`, attack M8).
    pub created_git: BTreeSet<String>,
}

/// How a grant's parser says what is wrong with the value it was given: the error naming that
/// value, with the message.
type Bad<'a> = &'a dyn Fn(&str) -> SecurityError;

/// A grant's value that names a path relative to the workspace root: trailing `/` dropped;
/// `None` when empty, absolute, or holding a `..` component.
fn workspace_relative(p: &str) -> Option<&str> {
    let p = p.trim_end_matches('/');
    let ok = !p.is_empty() && !p.starts_with('/') && !p.split('/').any(|c| c == "..");
    ok.then_some(p)
}

/// Whether `n` is `<kind>:<mode>` for a namespace kind the engine shares (`namespace:` grant).
fn namespace_grant(n: &str) -> bool {
    const KNOWN: [&str; 7] = [
        "pid",
        "ipc",
        "uts",
        "userns",
        "cgroup",
        "volumes_from",
        "network",
    ];
    n.split_once(':')
        .is_some_and(|(kind, mode)| KNOWN.contains(&kind) && !mode.is_empty())
}

/// A grant's value that is one non-empty word (no whitespace).
fn word(v: &str) -> Option<&str> {
    (!v.is_empty() && !v.contains(char::is_whitespace)).then_some(v)
}

impl Grants {
    /// Parses `--allow` values: `privileged`, `root`, `network:host`, `cap:<NAME>`,
    /// `mount:<absolute host path>`, `security-opt:<option>`, `device:<host path>`,
    /// `network:container:<x>` or `network:<name>`, `publish:<ip>:<port|*>` or `publish:*`,
    /// `host-command`, `host-command:sha256:<hex>`, `gitdir:<absolute host path>`, `env:<NAME>`, `build-network`,
    /// `volume:<name>`, `namespace:<pid|ipc|uts|userns|cgroup|volumes_from|network>:<mode>`,
    /// `device-cgroup-rule:<rule>`, `image-tag:<reference>`, `egress:<host[:port][=address]>`,
    /// `runtime-option:<key>=<value>`, `build-context:<url>`, `compose-file:<host path>`,
    /// `gpu`, `uncovered-git:<workspace-relative path | *>`, `registry:<host[:port]>`,
    /// `workspace-git:rw`, `created-git:<workspace-relative path>`.
    ///
    /// Errors: [`SecurityError::InvalidGrant`] naming the value.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self> {
        let mut grants = Grants::default();
        for value in values {
            grants.add(value.as_ref())?;
        }
        Ok(grants)
    }

    /// Adds one `--allow` value (see [`Grants::parse`]): a word ([`Grants::add_word`]) or a
    /// `kind:value` grant, dispatched by its kind.
    ///
    /// Errors: [`SecurityError::InvalidGrant`] naming the value.
    pub fn add(&mut self, value: &str) -> Result<()> {
        let bad = |message: &str| SecurityError::InvalidGrant {
            value: value.to_string(),
            message: message.to_string(),
        };
        match value.split_once(':') {
            None => self.add_word(value, &bad),
            Some(("device", _)) if crate::security::gpu::is_gpu_grant(value) => {
                self.gpu = true;
                Ok(())
            }
            Some((
                kind @ ("host-command" | "gitdir" | "mount" | "compose-file" | "uncovered-git"
                | "created-git" | "workspace-git"),
                v,
            )) => self.add_host_grant((kind, v), &bad),
            Some((
                kind @ ("egress" | "env" | "volume" | "image-tag" | "build-context" | "registry"
                | "publish"),
                v,
            )) => self.add_named_grant((kind, v), &bad),
            Some((kind, v)) => self.add_engine_grant((kind, v), &bad),
        }
    }

    /// A grant of one word: `privileged`, `root`, `host-command`, `build-network`, `gpu`.
    fn add_word(&mut self, value: &str, bad: Bad<'_>) -> Result<()> {
        match value {
            "privileged" => self.privileged = true,
            "root" => self.root = true,
            "host-command" => self.host_command = true,
            "build-network" => self.build_network = true,
            _ if crate::security::gpu::is_gpu_grant(value) => self.gpu = true,
            _ => return Err(bad("unknown permission")),
        }
        Ok(())
    }

    /// A grant about the host and the workspace: `host-command:sha256:<hex>`, `gitdir:`,
    /// `mount:`, `compose-file:` (absolute host paths), `uncovered-git:`, `created-git:`
    /// (workspace-relative paths), `workspace-git:rw`.
    fn add_host_grant(&mut self, grant: (&str, &str), bad: Bad<'_>) -> Result<()> {
        match grant {
            ("host-command", bound) => {
                let digest = bound
                    .strip_prefix("sha256:")
                    .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or_else(|| {
                        bad("expected `host-command:sha256:<64 hex digits>` (the grant a refusal names)")
                    })?;
                self.host_commands.insert(digest.to_ascii_lowercase());
            }
            ("gitdir", p) => {
                let p = normalize_path(p).ok_or_else(|| bad("expected an absolute host path"))?;
                self.git_dirs.insert(p);
            }
            ("mount", p) => {
                let p = normalize_path(p).ok_or_else(|| bad("expected an absolute host path"))?;
                self.mounts.insert(p);
            }
            ("compose-file", p) => {
                let p = if p.contains('$') {
                    Some(p.to_string())
                } else {
                    normalize_path(p)
                };
                let p = p.ok_or_else(|| bad("expected an absolute host path"))?;
                self.compose_files.insert(p);
            }
            ("uncovered-git", p) => {
                let p = workspace_relative(p).ok_or_else(|| {
                    bad(
                        "expected a path relative to the workspace root (`uncovered-git:vendor/lib/.git`) or `uncovered-git:*`",
                    )
                })?;
                self.uncovered_git.insert(p.to_string());
            }
            ("created-git", p) => {
                let p = workspace_relative(p).ok_or_else(|| {
                    bad("expected a path relative to the workspace root (`created-git:tools/.git`)")
                })?;
                self.created_git.insert(p.to_string());
            }
            ("workspace-git", "rw") => self.workspace_git_rw = true,
            ("workspace-git", _) => {
                return Err(bad(
                    "expected `workspace-git:rw` (the workspace's git directories writable by the container)",
                ));
            }
            _ => return Err(bad("unknown permission")),
        }
        Ok(())
    }

    /// A grant that names something: `egress:`, `env:`, `volume:`, `image-tag:`,
    /// `build-context:`, `registry:`, `publish:`.
    fn add_named_grant(&mut self, grant: (&str, &str), bad: Bad<'_>) -> Result<()> {
        match grant {
            ("egress", d) => {
                let d = word(d).ok_or_else(|| {
                    bad("expected an egress destination (`egress:host[:port][=address]`)")
                })?;
                self.egress.insert(egress_key(d));
            }
            ("env", n) => {
                // A name as `${localEnv:NAME}` or `-e NAME` can spell it (no `=`, no NUL).
                if n.is_empty() || n.contains(['=', '\0']) {
                    return Err(bad("expected an environment variable name (`env:NAME`)"));
                }
                self.env.insert(n.to_string());
            }
            ("volume", v) => {
                if v.is_empty() || v.contains(['/', '\0']) {
                    return Err(bad("expected a volume name (`volume:NAME`)"));
                }
                self.volumes.insert(v.to_string());
            }
            ("image-tag", t) => {
                let t = word(t)
                    .ok_or_else(|| bad("expected an image reference (`image-tag:NAME[:TAG]`)"))?;
                self.image_tags.insert(t.to_string());
            }
            ("build-context", u) => {
                let u = word(u)
                    .ok_or_else(|| bad("expected a build context URL (`build-context:URL`)"))?;
                self.build_contexts.insert(u.to_string());
            }
            ("registry", h) => {
                if h.is_empty() || h.contains(['/', '@']) || h.contains(char::is_whitespace) {
                    return Err(bad(
                        "expected a registry host, with its port if it has one (`registry:registry.example.com`, `registry:docker.io`)",
                    ));
                }
                self.registries.insert(h.to_ascii_lowercase());
            }
            ("publish", a) => {
                if a != "*" && split_publish_grant(a).is_none() {
                    return Err(bad(
                        "expected `publish:<ip>:<port>`, `publish:<ip>:*` or `publish:*`",
                    ));
                }
                self.publish.insert(a.to_string());
            }
            _ => return Err(bad("unknown permission")),
        }
        Ok(())
    }

    /// A grant of an engine option: `network:`, `namespace:`, `device-cgroup-rule:`,
    /// `runtime-option:`, `cap:`, `security-opt:`, `device:`; any other kind is unknown.
    fn add_engine_grant(&mut self, grant: (&str, &str), bad: Bad<'_>) -> Result<()> {
        match grant {
            ("network", "host") => self.host_network = true,
            ("namespace", n) if namespace_grant(n) => {
                self.namespaces.insert(n.to_string());
            }
            ("namespace", _) => {
                return Err(bad(
                    "expected `namespace:<pid|ipc|uts|userns|cgroup|volumes_from|network>:<mode>` (`namespace:pid:host`)",
                ));
            }
            ("device-cgroup-rule", r) if !r.trim().is_empty() => {
                self.device_cgroup_rules.insert(r.to_string());
            }
            ("runtime-option", o) if o.split_once('=').is_some_and(|(k, _)| !k.is_empty()) => {
                self.runtime_options.insert(o.to_string());
            }
            ("cap", c) if !c.is_empty() => {
                self.capabilities.insert(normalize_cap(c));
            }
            ("security-opt", o) if !o.is_empty() => {
                self.security_opts.insert(o.to_string());
            }
            ("device", d)
                if d.starts_with('/') || crate::security::gpu::is_reservation_device(d) =>
            {
                self.devices.insert(d.to_string());
            }
            ("network", n) => match network_permission(n) {
                Some(Permission::Network(n)) => {
                    self.networks.insert(n);
                }
                _ => {
                    return Err(bad(
                        "expected `network:host`, `network:container:<name>` or `network:<network name>`",
                    ));
                }
            },
            _ => return Err(bad("unknown permission")),
        }
        Ok(())
    }

    /// Whether `permission` is granted.
    pub fn allows(&self, permission: &Permission) -> bool {
        match permission {
            Permission::Privileged => self.privileged,
            Permission::Root => self.root,
            Permission::HostNetwork => self.host_network,
            Permission::Capability(c) => self.capabilities.contains(c),
            Permission::Mount(p) => self.mounts.iter().any(|g| is_within(p, g)),
            Permission::SecurityOpt(o) => self.security_opts.contains(o),
            Permission::Device(d) => {
                self.devices.contains(d) || (self.gpu && crate::security::gpu::is_gpu_device(d))
            }
            Permission::Gpu(_) => self.gpu,
            Permission::EngineSocket(_)
            | Permission::IdentityLabel(_)
            | Permission::HostHome(_)
            | Permission::UnresolvablePath(_) => false,
            Permission::Namespace(n) => self.namespaces.contains(n),
            Permission::Egress(d) => self.egress.contains(&egress_key(d)),
            Permission::DeviceCgroupRule(r) => self.device_cgroup_rules.contains(r),
            Permission::RuntimeOption(o) => self.runtime_options.contains(o),
            Permission::Network(n) => self.networks.contains(n),
            Permission::PublishPort(a) => {
                self.publish.contains("*")
                    || self.publish.contains(a)
                    || split_publish_grant(a)
                        .is_some_and(|(ip, _)| self.publish.contains(&format!("{ip}:*")))
            }
            Permission::HostCommand(command) => {
                self.host_command
                    || command
                        .digest()
                        .is_some_and(|d| self.host_commands.contains(&d))
            }
            Permission::GitDir(p) => self.git_dirs.iter().any(|g| is_within(p, g)),
            Permission::HostEnv(n) => self.env.contains(n),
            Permission::BuildNetwork => self.build_network,
            Permission::Volume(v) => self.volumes.contains(v),
            Permission::ImageTag(t) => self.image_tags.contains(t),
            Permission::RemoteBuildContext(u) => self.build_contexts.contains(u),
            Permission::Registry(h) => self.registries.contains(h),
            // an interpolated path is granted only as written: `${X}` may hold `..`
            Permission::ComposeFile(p) if p.contains('$') => self.compose_files.contains(p),
            Permission::ComposeFile(p) => self
                .compose_files
                .iter()
                .any(|g| !g.contains('$') && is_within(p, g)),
        }
    }
}

/// The form an egress grant and request are compared in: lowercase, `:443` when no port is
/// written (the egress entry's default), so `--allow egress:api.example.test` grants the
/// request `api.example.test:443`. The syntax itself is `egress::policy`'s, checked there.
fn egress_key(dest: &str) -> String {
    let lower = dest.to_ascii_lowercase();
    let (host, pin) = match lower.split_once('=') {
        Some((h, p)) => (h.to_string(), Some(p.to_string())),
        None => (lower.clone(), None),
    };
    let has_port = match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.matches(':').count() == 1,
    };
    let host = if has_port || host.matches(':').count() > 1 {
        host
    } else {
        format!("{host}:443")
    };
    match pin {
        Some(p) => format!("{host}={p}"),
        None => host,
    }
}

impl Grants {
    /// A devcontainer.json request judged by the common rule: `reference` allows it;
    /// `hardened` grants it with its `--allow` flag, else allows it when the profile deems
    /// it `harmless`, else refuses it.
    pub fn judge_devcontainer_json(
        &self,
        profile: &SecurityProfile,
        permission: Permission,
        harmless: bool,
    ) -> PermissionRequest {
        let status = match profile {
            SecurityProfile::Reference => RequestStatus::AllowedByProfile,
            SecurityProfile::Hardened(_) if self.allows(&permission) => RequestStatus::Granted,
            SecurityProfile::Hardened(_) if harmless => RequestStatus::AllowedByProfile,
            SecurityProfile::Hardened(_) => RequestStatus::Refused,
        };
        PermissionRequest {
            permission,
            source: Source::DevcontainerJson,
            status,
        }
    }
}
