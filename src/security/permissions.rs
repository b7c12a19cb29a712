//! What the policy speaks of: a [`Permission`] beyond the hardened baseline, the [`Source`]
//! that asked for it, and the [`PermissionRequest`] with what was done with it
//! ([`RequestStatus`]), shown to the user and serialised for the `up` result.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// The digest a `host-command:sha256:<hex>` grant names for a command that names no file of
/// the workspace: SHA-256 of the command exactly as its [`Permission::HostCommand`] request
/// shows it (the shlex-quoted argv), lowercase hex. A grant bound to it grants that command
/// only: a repository (or an agent) that changes the command after the grant is asked again
/// (issue 25; spec-note 0410). A command that names workspace files is bound to their content
/// too ([`HostCommand::digest`]).
pub fn host_command_digest(argv: &str) -> String {
    hex::encode(Sha256::digest(argv.as_bytes()))
}

/// A file of the workspace that a host command names, which a grant of the command covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoveredFile {
    /// Where it is, relative to the workspace folder (resolved: no link, no `..`).
    pub path: String,
    /// SHA-256 of its content, lowercase hex.
    pub sha256: String,
}

/// A command devcell would run on the host for the repository (`initializeCommand`, a Compose
/// `provider`), with what a grant of it covers: the command as shown and the content of every
/// workspace file it names (spec-note 0410). The repository, and an agent in a handoff, can
/// write the workspace: a grant that covered the text only would run whatever the agent wrote
/// into a script the command runs (attacks J7).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostCommand {
    /// The command, as shown: the shlex-quoted argv (or the provider's line).
    pub command: String,
    /// The workspace files the command names (sorted by path), with their content's digest.
    pub files: Vec<CoveredFile>,
    /// What the command names in the workspace that no grant can cover, each with why (a
    /// folder, a file devcell cannot read, a link leaving the workspace): such a command is
    /// granted for one run only (`--allow host-command` on the command line).
    pub uncovered: Vec<String>,
    /// Set by the judgement when the user holds a grant for the command's text alone (how a
    /// grant was made before grants covered the files a command names): the refusal says why
    /// it is asked again.
    pub text_only_grant: bool,
}

impl HostCommand {
    /// The digest its `host-command:sha256:<hex>` grant names: [`host_command_digest`] of the
    /// command when it names no workspace file (grants made before files were covered keep
    /// working for such commands); otherwise SHA-256 of the JSON array
    /// `[command, [[path, sha256], …]]` (the files in path order), so a changed file, a file
    /// added or removed, or a changed command is asked again. `None` when the command names
    /// something no grant can cover ([`HostCommand::uncovered`]).
    pub fn digest(&self) -> Option<String> {
        if !self.uncovered.is_empty() {
            return None;
        }
        if self.files.is_empty() {
            return Some(host_command_digest(&self.command));
        }
        let files: Vec<[&str; 2]> = self
            .files
            .iter()
            .map(|f| [f.path.as_str(), f.sha256.as_str()])
            .collect();
        let bound = serde_json::json!([self.command, files]);
        Some(hex::encode(Sha256::digest(bound.to_string().as_bytes())))
    }
}

/// A command that names no workspace file (tests, and commands known to read none).
impl From<&str> for HostCommand {
    fn from(command: &str) -> Self {
        HostCommand::from(command.to_string())
    }
}

/// A command that names no workspace file.
impl From<String> for HostCommand {
    fn from(command: String) -> Self {
        HostCommand {
            command,
            files: Vec::new(),
            uncovered: Vec::new(),
            text_only_grant: false,
        }
    }
}

impl fmt::Display for HostCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host command `{}`", self.command)?;
        if !self.files.is_empty() {
            let files: Vec<String> = self
                .files
                .iter()
                .map(|c| {
                    format!(
                        "`{}` (sha256 {})",
                        c.path,
                        &c.sha256[..12.min(c.sha256.len())]
                    )
                })
                .collect();
            if self.uncovered.is_empty() {
                // every file the command (or a script it runs, by its text) reaches is here
                write!(
                    f,
                    "; a grant covers the command and {}, the workspace files it runs or reads",
                    files.join(", ")
                )?;
            } else {
                // not "covers": the command reaches more than these (attack 24, O7)
                write!(f, "; it runs or reads {}", files.join(", "))?;
            }
        }
        if !self.uncovered.is_empty() {
            write!(
                f,
                "; it names {}, which no standing grant can cover (their content can change \
                 after the grant): grant it for one run only",
                self.uncovered.join(", ")
            )?;
        }
        if self.text_only_grant {
            write!(
                f,
                "; your grant `host-command:sha256:{}` covers the command's text only, and a \
                 grant now also covers the files the command runs (they may have changed since \
                 you granted it): asked again",
                host_command_digest(&self.command)
            )?;
        }
        Ok(())
    }
}

/// Who asked for something.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The repository's devcontainer.json (including its `runArgs`).
    DevcontainerJson,
    /// A Feature's `devcontainer-feature.json`, by Feature id.
    Feature(String),
    /// The base image's `devcontainer.metadata` label.
    ImageMetadata,
    /// The base image's `USER` (root when unset).
    ImageUser,
    /// The user's own command line (`up --mount …`): granted by being asked for.
    CommandLine,
    /// An existing container `up` would reuse (short id): what it already has
    /// ([`crate::security::reuse`]).
    ExistingContainer(String),
    /// A repository's git link (`.git` file or symlink, or a `commondir` file; host path):
    /// it names the git directory devcell's host git would read and the handoff would mount.
    GitLink(String),
    /// A service of the resolved Compose model and the property that asks (`cap_add`,
    /// `volumes`, `network_mode`, …; spec-note 0601).
    ComposeService {
        /// The service name.
        service: String,
        /// The Compose property, as Compose spells it.
        property: String,
    },
    /// A Compose file of the repository (repository-relative where it can be) and the key
    /// that names another file Compose reads (`include[0].path`,
    /// `services.app.extends.file`; spec-note 0601).
    ComposeFile {
        /// The file that names it.
        file: String,
        /// The key path in that file.
        key: String,
    },
    /// The Dockerfile of devcontainer.json's `build` (as devcontainer.json names it) and what
    /// in it asks (`RUN --network=host`, `# syntax=…`, a base image's `ONBUILD`; spec-note
    /// 0612). A Compose service's Dockerfile is that service's ([`Source::ComposeService`]).
    Dockerfile {
        /// The Dockerfile.
        file: String,
        /// The instruction or flag, as read.
        what: String,
    },
    /// The image of an `image` configuration, by reference, and what in it asks (its
    /// `ONBUILD` triggers, which devcell's Features and uid layer builds `FROM` it would run;
    /// spec-note 0612).
    Image {
        /// The image reference, as the configuration names it.
        image: String,
        /// What asks, as read from the image's configuration.
        what: String,
    },
    /// What asks (the inner source), in a repository whose `HEAD` descends from none of the
    /// commits a fetch-back recorded as the user's before an agent's
    /// (`refs/devcell/before-agent/…`): an orphan branch the agent made, or its commit kept
    /// aside and checked out; nothing committed there counts as the user's (spec-note 0467).
    AgentHead(Box<Source>),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::DevcontainerJson => f.write_str("devcontainer.json"),
            Source::Feature(id) => write!(f, "Feature `{id}`"),
            Source::ImageMetadata => write!(f, "image label `{}`", crate::names::METADATA_LABEL),
            Source::ImageUser => f.write_str("image `USER`"),
            Source::CommandLine => f.write_str("command line"),
            Source::ExistingContainer(id) => write!(f, "existing container {id}"),
            Source::GitLink(path) => write!(f, "git link `{path}`"),
            Source::ComposeService { service, property } => {
                write!(f, "Compose service `{service}` (`{property}`)")
            }
            Source::ComposeFile { file, key } => write!(f, "Compose file `{file}` (`{key}`)"),
            Source::Dockerfile { file, what } => write!(f, "Dockerfile `{file}` (`{what}`)"),
            Source::Image { image, what } => write!(f, "image `{image}` (`{what}`)"),
            Source::AgentHead(inner) => write!(
                f,
                "{inner}; `HEAD` descends from none of the commits devcell recorded as yours \
                 before an agent's (`refs/devcell/before-agent/…`), so its committed files \
                 count as the agent's"
            ),
        }
    }
}

/// Something beyond the hardened baseline.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// `privileged: true` / `--privileged`.
    Privileged,
    /// The container or remote user is root.
    Root,
    /// A Linux capability (normalised: upper case, no `CAP_` prefix; `ALL` for all).
    Capability(String),
    /// A bind mount of a host path outside the workspace (normalised absolute path).
    Mount(String),
    /// A security option other than `no-new-privileges`.
    SecurityOpt(String),
    /// A host device.
    Device(String),
    /// The host's network namespace (`--network host`).
    HostNetwork,
    /// A mount of (or over) a container engine's socket: never granted under `hardened`.
    EngineSocket(String),
    /// Another network namespace or network than the engine's default bridge or `none`:
    /// `container:<name|id>` (another container's namespace) or a named network, as written
    /// (spec-note 0430).
    Network(String),
    /// A port published on a host address other than loopback: `<ip>:<hostPort>` (IPv6 in
    /// brackets, `*` for an engine-chosen port) (spec-note 0431).
    PublishPort(String),
    /// A label key in the namespaces devcell and the reference CLI find containers by
    /// (`devcontainer.*`, `devcell.*`) set by the repository: never granted under `hardened`
    /// (spec-note 0421).
    IdentityLabel(String),
    /// A command the repository names that devcell would run on the host (`initializeCommand`,
    /// a Compose `provider`): its exact argv, shlex-quoted, and the workspace files it names
    /// (spec-note 0410).
    HostCommand(HostCommand),
    /// A git directory outside the workspace that a repository's git link names and that
    /// fails the worktree back-link check (resolved absolute path; spec-note 0411).
    GitDir(String),
    /// A host environment variable whose value the configuration sends into the container, a
    /// build, a label or a mount (`${localEnv:NAME}`, `runArgs -e NAME`; spec-note 0440).
    HostEnv(String),
    /// A network for image builds of a container whose network is `none` (spec-note 0442).
    BuildNetwork,
    /// A namespace shared with the host or with a container outside the Compose project:
    /// `<kind>:<mode>` with kind `pid`, `ipc`, `uts`, `userns`, `cgroup` (`pid:host`,
    /// `ipc:container:x`), or `volumes_from:container:<x>` (spec-note 0601).
    Namespace(String),
    /// A device cgroup rule (`device_cgroup_rules`: `c 1:3 mr`), which with the default
    /// `MKNOD` capability opens host devices (spec-note 0601).
    DeviceCgroupRule(String),
    /// A bind of the host home folder, or of a folder holding it (the host's root): never
    /// granted under `hardened` (spec-note 0601); a path below the home folder is a
    /// [`Permission::Mount`].
    HostHome(String),
    /// A named volume that already exists on the engine and that devcell did not create for
    /// this workspace (another workspace's data, a volume someone made by hand), by name
    /// (spec-note 0443). A `local` volume with `o=bind` is judged as a bind of its `device`
    /// instead.
    Volume(String),
    /// An egress destination the repository requests for an `allowlist` container
    /// (`customizations.devcell.egress`), as its normalised entry `host:port[=address]`
    /// (spec-note 0501).
    Egress(String),
    /// A tag the repository gives the image it builds (`build.options --tag`/`-t`): the engine
    /// moves that tag to the repository's image, so another workspace (and its grants) that
    /// names the tag would run it (spec-note 0400, attacks).
    ImageTag(String),
    /// An engine option that changes what isolates the container or where the host accounts
    /// for it, as `<key>=<value>`: `runtime=<name>` (another OCI runtime than the engine's
    /// default), `cgroup_parent=<path>`, `sysctl.<name>=<value>`, `oom_score_adj=<n>` below
    /// zero (spec-note 0400, attacks).
    RuntimeOption(String),
    /// A build context (or named build context) the engine fetches from the network (a git
    /// or HTTP URL in a Compose service's `build.context`): by URL, as written (spec-note
    /// 0601).
    RemoteBuildContext(String),
    /// A local file (or folder) outside the workspace that Compose reads as configuration
    /// before devcell sees its model: an `include` path, `project_directory` or `env_file`,
    /// an `extends.file`, a `label_file` (resolved path; a path written with `${…}` as
    /// written, joined to its base folder; spec-note 0601).
    ComposeFile(String),
    /// A host path the repository mounts that devcell cannot resolve (a folder it cannot
    /// search, a link loop, a path through procfs), as written: never granted under
    /// `hardened`, since the engine would follow it somewhere devcell never saw (spec-note
    /// 0400, attacks F1/F2).
    UnresolvablePath(String),
    /// Every GPU of the host, which the configuration's `hostRequirements.gpu` asks for when
    /// the engine has one (or `--gpu-availability all`): what the configuration wrote
    /// (`true`, `"optional"`, `{"cores":2}`; spec-note 0646).
    Gpu(String),
    /// A registry host an image or Feature reference is fetched from on the host's network
    /// while the container's network is closed, which the committed configuration does not
    /// name (lowercase, with its port; `docker.io` for Docker Hub's short names): the agent
    /// could have written a secret into the reference (attack K12, spec-note 0400).
    Registry(String),
}

impl Permission {
    /// The `--allow` flag that grants it; `None` for [`Permission::EngineSocket`].
    pub fn grant_flag(&self) -> Option<String> {
        Some(match self {
            Permission::Privileged => "--allow privileged".to_string(),
            Permission::Root => "--allow root".to_string(),
            Permission::Capability(c) => format!("--allow cap:{c}"),
            Permission::Mount(p) => format!("--allow mount:{p}"),
            Permission::SecurityOpt(o) => format!("--allow security-opt:{o}"),
            Permission::Device(d) => format!("--allow device:{d}"),
            Permission::HostNetwork => "--allow network:host".to_string(),
            Permission::HostEnv(n) => format!("--allow env:{n}"),
            Permission::BuildNetwork => "--allow build-network".to_string(),
            Permission::Network(n) => format!("--allow network:{n}"),
            Permission::PublishPort(a) => format!("--allow publish:{a}"),
            Permission::EngineSocket(_)
            | Permission::IdentityLabel(_)
            | Permission::HostHome(_)
            | Permission::UnresolvablePath(_) => return None,
            Permission::HostCommand(command) => match command.digest() {
                Some(digest) => format!("--allow host-command:sha256:{digest}"),
                None => "--allow host-command".to_string(),
            },
            Permission::Namespace(n) => format!("--allow namespace:{n}"),
            Permission::DeviceCgroupRule(r) => format!("--allow device-cgroup-rule:{r}"),
            Permission::GitDir(p) => format!("--allow gitdir:{p}"),
            Permission::Volume(v) => format!("--allow volume:{v}"),
            Permission::Egress(d) => format!("--allow egress:{d}"),
            Permission::ImageTag(t) => format!("--allow image-tag:{t}"),
            Permission::RuntimeOption(o) => format!("--allow runtime-option:{o}"),
            Permission::RemoteBuildContext(u) => format!("--allow build-context:{u}"),
            Permission::ComposeFile(p) => format!("--allow compose-file:{p}"),
            Permission::Gpu(_) => "--allow gpu".to_string(),
            Permission::Registry(h) => format!("--allow registry:{h}"),
        })
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Permission::Privileged => f.write_str("privileged mode"),
            Permission::Root => f.write_str("running as root"),
            Permission::Capability(c) => write!(f, "capability `{c}`"),
            Permission::Mount(p) => write!(f, "mount of host path `{p}`"),
            Permission::SecurityOpt(o) => write!(f, "security option `{o}`"),
            Permission::Device(d) => write!(f, "host device `{d}`"),
            Permission::HostNetwork => f.write_str("host network"),
            Permission::EngineSocket(p) => write!(f, "mount of the container engine socket `{p}`"),
            Permission::Network(n) => write!(f, "network `{n}`"),
            Permission::PublishPort(a) => write!(f, "port published on host address `{a}`"),
            Permission::IdentityLabel(k) => write!(f, "identity label `{k}` set by the repository"),
            Permission::HostCommand(command) => command.fmt(f),
            Permission::GitDir(p) => write!(f, "git directory `{p}` outside the workspace"),
            Permission::HostEnv(n) => write!(f, "host environment variable `{n}`"),
            Permission::BuildNetwork => f.write_str("network for image builds"),
            Permission::Namespace(n) => write!(f, "shared namespace `{n}`"),
            Permission::DeviceCgroupRule(r) => write!(f, "device cgroup rule `{r}`"),
            Permission::HostHome(p) => write!(
                f,
                "mount of the host home folder (or a folder holding it) `{p}`"
            ),
            Permission::Volume(v) => write!(
                f,
                "existing volume `{v}` that devcell did not create for this workspace"
            ),
            Permission::Egress(d) => write!(f, "egress to `{d}`"),
            Permission::ImageTag(t) => write!(f, "image tag `{t}` for the built image"),
            Permission::RuntimeOption(o) => write!(f, "engine option `{o}`"),
            Permission::RemoteBuildContext(u) => {
                write!(f, "build context `{u}` fetched from the network")
            }
            Permission::ComposeFile(p) => {
                write!(f, "Compose file `{p}` outside the workspace")
            }
            Permission::Gpu(asked) => {
                write!(f, "the host's GPUs (`hostRequirements.gpu`: {asked})")
            }
            Permission::Registry(h) => write!(
                f,
                "registry `{h}`, which the committed configuration does not name, fetched from on the host's network while the container has none"
            ),
            Permission::UnresolvablePath(p) => write!(
                f,
                "mount of host path `{p}`, which devcell cannot resolve (a folder it cannot search, a link loop, or a path through /proc)"
            ),
        }
    }
}

/// What was done with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    /// The user granted it; applied.
    Granted,
    /// Applied because the profile is `reference` (or the user asked on the command line).
    AllowedByProfile,
    /// Not granted: creation is refused.
    Refused,
    /// Never allowed under this profile (an engine socket): creation is refused.
    Forbidden,
}

/// One permission request: what, who asked, and what was done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRequest {
    /// What is asked for.
    pub permission: Permission,
    /// Who asked.
    pub source: Source,
    /// What was done.
    pub status: RequestStatus,
}

impl fmt::Display for PermissionRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (from {})", self.permission, self.source)?;
        match (&self.status, self.permission.grant_flag()) {
            (RequestStatus::Refused, Some(flag)) => write!(f, ", grant with `{flag}`"),
            (RequestStatus::Forbidden, _) => f.write_str(", never allowed"),
            (RequestStatus::Granted, _) => f.write_str(", granted"),
            _ => Ok(()),
        }
    }
}

impl Permission {
    /// The kind as a stable word: `privileged`, `root`, `capability`, `mount`, `securityOpt`,
    /// `device`, `hostNetwork`, `engineSocket`, `network`, `publishPort`, `identityLabel`,
    /// `hostCommand`, `gitDir`, `hostEnv`, `buildNetwork`, `volume`, `namespace`,
    /// `deviceCgroupRule`, `hostHome`, `imageTag`, `egress`, `runtimeOption`,
    /// `remoteBuildContext`, `composeFile`, `unresolvablePath`, `gpu`, `registry`.
    pub fn kind(&self) -> &'static str {
        match self {
            Permission::Privileged => "privileged",
            Permission::Root => "root",
            Permission::Capability(_) => "capability",
            Permission::Mount(_) => "mount",
            Permission::SecurityOpt(_) => "securityOpt",
            Permission::Device(_) => "device",
            Permission::HostNetwork => "hostNetwork",
            Permission::EngineSocket(_) => "engineSocket",
            Permission::Network(_) => "network",
            Permission::PublishPort(_) => "publishPort",
            Permission::IdentityLabel(_) => "identityLabel",
            Permission::HostCommand(_) => "hostCommand",
            Permission::GitDir(_) => "gitDir",
            Permission::HostEnv(_) => "hostEnv",
            Permission::BuildNetwork => "buildNetwork",
            Permission::Volume(_) => "volume",
            Permission::Namespace(_) => "namespace",
            Permission::DeviceCgroupRule(_) => "deviceCgroupRule",
            Permission::HostHome(_) => "hostHome",
            Permission::ImageTag(_) => "imageTag",
            Permission::Egress(_) => "egress",
            Permission::RuntimeOption(_) => "runtimeOption",
            Permission::RemoteBuildContext(_) => "remoteBuildContext",
            Permission::ComposeFile(_) => "composeFile",
            Permission::UnresolvablePath(_) => "unresolvablePath",
            Permission::Gpu(_) => "gpu",
            Permission::Registry(_) => "registry",
        }
    }

    /// The capability, path or option the permission is about, if any.
    pub fn value(&self) -> Option<&str> {
        match self {
            Permission::Capability(v)
            | Permission::Mount(v)
            | Permission::SecurityOpt(v)
            | Permission::Device(v)
            | Permission::EngineSocket(v)
            | Permission::Network(v)
            | Permission::PublishPort(v)
            | Permission::IdentityLabel(v)
            | Permission::GitDir(v)
            | Permission::HostEnv(v)
            | Permission::Volume(v)
            | Permission::Namespace(v)
            | Permission::DeviceCgroupRule(v)
            | Permission::HostHome(v)
            | Permission::ImageTag(v)
            | Permission::Egress(v)
            | Permission::RuntimeOption(v)
            | Permission::RemoteBuildContext(v)
            | Permission::ComposeFile(v)
            | Permission::UnresolvablePath(v)
            | Permission::Gpu(v)
            | Permission::Registry(v) => Some(v),
            Permission::HostCommand(command) => Some(&command.command),
            _ => None,
        }
    }
}

impl RequestStatus {
    /// `granted`, `allowedByProfile`, `refused`, `forbidden`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Granted => "granted",
            RequestStatus::AllowedByProfile => "allowedByProfile",
            RequestStatus::Refused => "refused",
            RequestStatus::Forbidden => "forbidden",
        }
    }
}

/// JSON form for the `up` result: `{"permission": "capability", "value": "SYS_PTRACE",
/// "source": "Feature `ghcr.io/x/y:1`", "status": "refused", "grant": "--allow cap:SYS_PTRACE"}`
/// (`value` and `grant` omitted when there is none). A host command adds `covers`
/// (`[{"path", "sha256"}]`, the workspace files its grant covers) and `uncovered` (what it
/// names that no grant can cover) when they are not empty.
impl serde::Serialize for PermissionRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("permission", self.permission.kind())?;
        if let Some(v) = self.permission.value() {
            map.serialize_entry("value", v)?;
        }
        map.serialize_entry("source", &self.source.to_string())?;
        map.serialize_entry("status", self.status.as_str())?;
        if let Some(g) = self.permission.grant_flag() {
            map.serialize_entry("grant", &g)?;
        }
        if let Permission::HostCommand(command) = &self.permission {
            if !command.files.is_empty() {
                let covers: Vec<_> = command
                    .files
                    .iter()
                    .map(|c| serde_json::json!({"path": c.path, "sha256": c.sha256}))
                    .collect();
                map.serialize_entry("covers", &covers)?;
            }
            if !command.uncovered.is_empty() {
                map.serialize_entry("uncovered", &command.uncovered)?;
            }
        }
        map.end()
    }
}
