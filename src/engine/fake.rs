//! An in-memory [`Engine`] for unit tests: the seam a second backend plugs into, proved by
//! running real operations (`down`, `exec`, …) against something that is not Docker.
//!
//! It keeps containers (labels, mounts, running or not), images (with files readable through
//! [`Engine::read_image_file`]), container files, volumes, and a record of every exec (argv,
//! user, working folder) and of the calls that change state. Nothing reaches a daemon or the
//! host. Its answers are the same typed facts a real backend gives ([`ContainerInfo`] with
//! its security fields, [`EngineInfo`]), so an audit or `doctor` reads it as it reads Docker.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;

use super::spec::Collector;
use super::{
    BuildRequest, ContainerInfo, ContainerSpec, ContainerSummary, DeviceMapping, EnforcedLimits,
    Engine, EngineError, EngineInfo, EngineVersion, ExecInput, ExecOutput, ExecRequest, ExecResult,
    HostSecurity, ImageInfo, ImageSummary, MountInfo, NetworkInfo, PublishedPort, Result,
    VolumeInfo,
};
use crate::progress::{Event, Reporter};

/// An in-memory engine (see the module documentation). Build it with [`FakeEngine::new`],
/// add images and containers, run an operation through `&FakeEngine`, then read what it did
/// ([`FakeEngine::execs`], [`FakeEngine::calls`], [`FakeEngine::container`]).
#[derive(Debug, Default)]
pub struct FakeEngine {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    containers: Vec<ContainerInfo>,
    images: Vec<ImageInfo>,
    /// (image id, path) → content.
    image_files: BTreeMap<(String, String), Vec<u8>>,
    /// (container id, path) → content.
    container_files: BTreeMap<(String, String), Vec<u8>>,
    volumes: BTreeMap<String, BTreeMap<String, String>>,
    execs: Vec<(String, ExecRequest)>,
    builds: Vec<BuildRequest>,
    calls: Vec<String>,
    /// The next create answers Docker's 404 `No such image` (as after a concurrent `rmi`).
    lose_image_at_next_create: bool,
    exec_reply: ExecResult,
    next_id: u64,
}

/// One exec the fake ran: the container and the request as the operation sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedExec {
    /// The container id.
    pub container: String,
    /// The request (argv, user, environment, working folder, TTY).
    pub request: ExecRequest,
}

impl FakeEngine {
    /// An engine with nothing in it.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a local image named `reference` (its only tag) with id `id`; `files` are readable
    /// through [`Engine::read_image_file`] (e.g. `/etc/passwd`). Use an id that is not hex
    /// (`fake-image-1`): the host's image-file cache keys only hex ids, so nothing is
    /// remembered on the host.
    pub fn add_image(&self, reference: &str, id: &str, files: &[(&str, &str)]) {
        let mut state = self.lock();
        state.images.push(ImageInfo {
            id: id.to_string(),
            repo_tags: vec![reference.to_string()],
            ..ImageInfo::default()
        });
        for (path, content) in files {
            state.image_files.insert(
                (id.to_string(), (*path).to_string()),
                content.as_bytes().to_vec(),
            );
        }
    }

    /// Adds a container made from `spec` (as [`Engine::create_container`] would), started
    /// when `running`; returns its id.
    pub fn add_container(&self, spec: &ContainerSpec, running: bool) -> String {
        let id = self.create(spec);
        if running {
            self.set_running(&id, true);
        }
        id
    }

    /// Makes the next [`Engine::create_container`] fail as Docker's does when the image was
    /// removed since it was prepared (404 `No such image`); later creates succeed.
    pub fn lose_image_at_next_create(&self) {
        self.lock().lose_image_at_next_create = true;
    }

    /// What every later exec answers (exit code and collected output).
    pub fn reply_to_execs(&self, reply: ExecResult) {
        self.lock().exec_reply = reply;
    }

    /// Every exec run so far, in order.
    pub fn execs(&self) -> Vec<RecordedExec> {
        self.lock()
            .execs
            .iter()
            .map(|(container, request)| RecordedExec {
                container: container.clone(),
                request: request.clone(),
            })
            .collect()
    }

    /// The calls that changed something, in order (`create <id>`, `start <id>`,
    /// `stop <id>`, `remove <id>`, `exec <id>`, `write <id> <path>`, …).
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Every build asked for, as the operation sent it (the fake builds nothing).
    pub fn builds(&self) -> Vec<BuildRequest> {
        self.lock().builds.clone()
    }

    /// The container `id` as the engine knows it now.
    pub fn container(&self, id: &str) -> Option<ContainerInfo> {
        self.lock().containers.iter().find(|c| c.id == id).cloned()
    }

    fn create(&self, spec: &ContainerSpec) -> String {
        let mut state = self.lock();
        state.next_id += 1;
        let id = format!("fakecontainer{:04}", state.next_id);
        let image_id = find_image(&state.images, &spec.image)
            .map(|i| i.id.clone())
            .unwrap_or_default();
        let info = ContainerInfo {
            id: id.clone(),
            name: spec.name.clone().unwrap_or_else(|| id.clone()),
            image_id,
            image: spec.image.clone(),
            status: "created".to_string(),
            running: false,
            labels: spec.labels.clone(),
            env: spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            user: super::created_user(&spec.labels, spec.user.clone().unwrap_or_default()),
            config_user: spec.user.clone().unwrap_or_default(),
            mounts: spec.mounts.iter().map(mount_info).collect(),
            networks: vec![network_name(spec.network_mode.as_deref())],
            host: host_security(spec),
            ..ContainerInfo::default()
        };
        state.containers.push(info);
        state.calls.push(format!("create {id}"));
        id
    }

    fn set_running(&self, id: &str, running: bool) -> bool {
        let mut state = self.lock();
        let Some(c) = state.containers.iter_mut().find(|c| c.id == id) else {
            return false;
        };
        c.running = running;
        c.status = if running { "running" } else { "exited" }.to_string();
        state
            .calls
            .push(format!("{} {id}", if running { "start" } else { "stop" }));
        true
    }

    fn summaries(&self, keep: impl Fn(&ContainerInfo) -> bool) -> Vec<ContainerSummary> {
        self.lock()
            .containers
            .iter()
            .filter(|c| keep(c))
            .map(|c| ContainerSummary {
                id: c.id.clone(),
                names: vec![format!("/{}", c.name)],
                image: c.image.clone(),
                image_id: c.image_id.clone(),
                state: c.status.clone(),
                labels: c.labels.clone(),
            })
            .collect()
    }
}

/// The image `reference` names: by id, or by one of its tags (`:latest` when none).
fn find_image<'a>(images: &'a [ImageInfo], reference: &str) -> Option<&'a ImageInfo> {
    let tagged = if reference
        .rsplit('/')
        .next()
        .is_some_and(|n| n.contains(':'))
    {
        reference.to_string()
    } else {
        format!("{reference}:latest")
    };
    images
        .iter()
        .find(|i| i.id == reference || i.repo_tags.iter().any(|t| *t == tagged || t == reference))
}

/// The `HostConfig` the engine would report for `spec`.
fn host_security(spec: &ContainerSpec) -> HostSecurity {
    HostSecurity {
        privileged: spec.privileged,
        cap_add: spec.cap_add.clone(),
        cap_drop: spec.cap_drop.clone(),
        security_opt: spec.security_opt.clone(),
        read_only_rootfs: spec.read_only_rootfs,
        tmpfs: spec.tmpfs.clone(),
        limits: spec.limits,
        network_mode: spec.network_mode.clone().unwrap_or_default(),
        init: spec.init,
        devices: spec.devices.iter().map(|d| d.host_path.clone()).collect(),
        device_mappings: spec
            .devices
            .iter()
            .map(|d| DeviceMapping {
                host_path: Some(d.host_path.clone()),
                container_path: d.container_path.clone(),
            })
            .collect(),
        device_requests: spec.gpu.is_some(),
        port_bindings: spec
            .ports
            .iter()
            .map(|p| PublishedPort {
                container_port: format!("{}/{}", p.container_port, p.protocol),
                host_ip: p.host_ip.clone().unwrap_or_default(),
                host_port: p.host_port.map(|h| h.to_string()).unwrap_or_default(),
            })
            .collect(),
        ..HostSecurity::default()
    }
}

/// The network a container of `mode` is attached to (the engine's default bridge when none
/// is named).
fn network_name(mode: Option<&str>) -> String {
    match mode {
        None | Some("" | "default") => "bridge".to_string(),
        Some(mode) => mode.to_string(),
    }
}

fn mount_info(m: &super::Mount) -> MountInfo {
    MountInfo {
        kind: m.kind.as_str().to_string(),
        source: m.source.clone().unwrap_or_default(),
        name: (m.kind == super::MountKind::Volume)
            .then(|| m.source.clone())
            .flatten(),
        destination: m.target.clone(),
        rw: !m.read_only,
    }
}

fn has_labels(c: &ContainerInfo, labels: &BTreeMap<String, String>) -> bool {
    labels.iter().all(|(k, v)| c.labels.get(k) == Some(v))
}

fn no_such(id: &str) -> EngineError {
    EngineError::NoSuchContainer { id: id.to_string() }
}

#[async_trait]
impl Engine for FakeEngine {
    async fn version(&self) -> Result<EngineVersion> {
        Ok(EngineVersion {
            version: "fake".to_string(),
            api_version: "1.41".to_string(),
            os: "linux".to_string(),
            arch: "amd64".to_string(),
            podman: false,
        })
    }

    async fn info(&self) -> Result<EngineInfo> {
        Ok(EngineInfo {
            cpus: 2,
            memory_bytes: 4 << 30,
            runtimes: vec!["runc".to_string()],
            default_runtime: "runc".to_string(),
            cgroup_version: "2".to_string(),
            enforced_limits: EnforcedLimits {
                memory: true,
                pids: true,
                cpu: true,
            },
            gpu: false,
            ..EngineInfo::default()
        })
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>> {
        Ok(find_image(&self.lock().images, reference).cloned())
    }

    async fn pull_image(&self, reference: &str, _reporter: &dyn Reporter) -> Result<()> {
        match find_image(&self.lock().images, reference) {
            Some(_) => Ok(()),
            None => Err(EngineError::InvalidReference {
                reference: reference.to_string(),
                message: "the fake engine has no such image".to_string(),
            }),
        }
    }

    async fn build_image(
        &self,
        request: &BuildRequest,
        _reporter: &dyn Reporter,
    ) -> Result<ImageInfo> {
        self.lock().builds.push(request.clone());
        Err(EngineError::Build {
            message: "the fake engine does not build".to_string(),
        })
    }

    async fn tag_image(&self, source: &str, target: &str) -> Result<()> {
        let mut state = self.lock();
        let id = find_image(&state.images, source)
            .map(|i| i.id.clone())
            .ok_or_else(|| EngineError::InvalidReference {
                reference: source.to_string(),
                message: "the fake engine has no such image".to_string(),
            })?;
        if let Some(image) = state.images.iter_mut().find(|i| i.id == id) {
            image.repo_tags.push(target.to_string());
        }
        state.calls.push(format!("tag {source} {target}"));
        Ok(())
    }

    async fn push_image(
        &self,
        reference: &str,
        _reporter: &dyn Reporter,
    ) -> Result<Option<String>> {
        Err(EngineError::Push {
            reference: reference.to_string(),
            message: "the fake engine has no registry".to_string(),
        })
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String> {
        if std::mem::take(&mut self.lock().lose_image_at_next_create) {
            return Err(EngineError::Api {
                operation: "create container",
                subject: spec.image.clone(),
                source: bollard::errors::Error::DockerResponseServerError {
                    status_code: 404,
                    message: format!("No such image: {}", spec.image),
                },
            });
        }
        Ok(self.create(spec))
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        self.set_running(id, true)
            .then_some(())
            .ok_or_else(|| no_such(id))
    }

    async fn stop_container(&self, id: &str, _timeout: Option<Duration>) -> Result<()> {
        self.set_running(id, false)
            .then_some(())
            .ok_or_else(|| no_such(id))
    }

    async fn remove_container(&self, id: &str, _force: bool) -> Result<()> {
        let mut state = self.lock();
        state.containers.retain(|c| c.id != id);
        state.container_files.retain(|(c, _), _| c != id);
        state.calls.push(format!("remove {id}"));
        Ok(())
    }

    async fn find_containers(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<ContainerSummary>> {
        Ok(self.summaries(|c| has_labels(c, labels)))
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>> {
        Ok(self
            .lock()
            .containers
            .iter()
            .find(|c| c.id == id || c.name == id)
            .cloned())
    }

    async fn exec(
        &self,
        id: &str,
        request: &ExecRequest,
        _input: ExecInput,
        output: ExecOutput<'_>,
    ) -> Result<ExecResult> {
        let reply = {
            let mut state = self.lock();
            if !state.containers.iter().any(|c| c.id == id && c.running) {
                return Err(no_such(id));
            }
            state.execs.push((id.to_string(), request.clone()));
            state.calls.push(format!("exec {id}"));
            state.exec_reply.clone()
        };
        match output {
            // bounded as the engine's own collection is
            ExecOutput::Collect | ExecOutput::CollectTail => {
                let tail = matches!(output, ExecOutput::CollectTail);
                let (mut out, mut err) = (Collector::new(tail), Collector::new(tail));
                out.push(&reply.stdout);
                err.push(&reply.stderr);
                let ((stdout, out_cut), (stderr, err_cut)) = (out.finish(), err.finish());
                Ok(ExecResult {
                    exit_code: reply.exit_code,
                    stdout,
                    stderr,
                    cut: out_cut || err_cut,
                })
            }
            ExecOutput::Report(reporter) => {
                for line in reply
                    .stdout_text()
                    .lines()
                    .chain(reply.stderr_text().lines())
                {
                    reporter.report(Event::Output(line.to_string()));
                }
                Ok(ExecResult {
                    exit_code: reply.exit_code,
                    ..ExecResult::default()
                })
            }
            ExecOutput::Write {
                mut stdout,
                mut stderr,
            } => {
                let io = |source| EngineError::ExecIo {
                    container: id.to_string(),
                    source,
                };
                stdout.write_all(&reply.stdout).await.map_err(io)?;
                stderr.write_all(&reply.stderr).await.map_err(io)?;
                Ok(ExecResult {
                    exit_code: reply.exit_code,
                    ..ExecResult::default()
                })
            }
        }
    }

    async fn find_containers_with_label_key(&self, key: &str) -> Result<Vec<ContainerSummary>> {
        Ok(self.summaries(|c| c.labels.contains_key(key)))
    }

    async fn list_containers(&self) -> Result<Vec<ContainerSummary>> {
        Ok(self.summaries(|_| true))
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageSummary>> {
        let matches = |tag: &str| {
            tag == reference
                || tag
                    .rsplit_once(':')
                    .is_some_and(|(repository, _)| repository == reference)
        };
        Ok(self
            .lock()
            .images
            .iter()
            .filter(|i| i.repo_tags.iter().any(|t| matches(t)))
            .map(|i| ImageSummary {
                id: i.id.clone(),
                repo_tags: i.repo_tags.clone(),
                ..ImageSummary::default()
            })
            .collect())
    }

    async fn remove_image(&self, reference: &str) -> Result<Vec<String>> {
        let mut state = self.lock();
        let Some(id) = find_image(&state.images, reference).map(|i| i.id.clone()) else {
            return Ok(Vec::new());
        };
        if state.containers.iter().any(|c| c.image_id == id) {
            return Err(EngineError::ImageInUse {
                reference: reference.to_string(),
                message: "a container uses it".to_string(),
            });
        }
        state.calls.push(format!("rmi {reference}"));
        let image = state.images.iter_mut().find(|i| i.id == id);
        if let Some(image) = image {
            image.repo_tags.retain(|t| t != reference);
            if !image.repo_tags.is_empty() {
                return Ok(Vec::new());
            }
        }
        state.images.retain(|i| i.id != id);
        Ok(vec![id])
    }

    async fn find_volumes(&self, labels: &BTreeMap<String, String>) -> Result<Vec<String>> {
        Ok(self
            .lock()
            .volumes
            .iter()
            .filter(|(_, l)| labels.iter().all(|(k, v)| l.get(k) == Some(v)))
            .map(|(name, _)| name.clone())
            .collect())
    }

    async fn find_networks(&self, _labels: &BTreeMap<String, String>) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn remove_network(&self, _name: &str) -> Result<()> {
        Ok(())
    }

    async fn inspect_network(&self, _name: &str) -> Result<Option<NetworkInfo>> {
        Ok(None)
    }

    async fn volume_exists(&self, name: &str) -> Result<bool> {
        Ok(self.lock().volumes.contains_key(name))
    }

    async fn remove_volume(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        state.volumes.remove(name);
        state.calls.push(format!("remove volume {name}"));
        Ok(())
    }

    async fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>> {
        Ok(self.lock().volumes.get(name).map(|labels| VolumeInfo {
            name: name.to_string(),
            driver: "local".to_string(),
            labels: labels.clone(),
            ..VolumeInfo::default()
        }))
    }

    async fn create_volume(&self, name: &str, labels: &BTreeMap<String, String>) -> Result<()> {
        let mut state = self.lock();
        state
            .volumes
            .entry(name.to_string())
            .or_insert_with(|| labels.clone());
        state.calls.push(format!("create volume {name}"));
        Ok(())
    }

    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let state = self.lock();
        if !state.containers.iter().any(|c| c.id == id) {
            return Err(no_such(id));
        }
        Ok(state
            .container_files
            .get(&(id.to_string(), path.to_string()))
            .cloned())
    }

    async fn read_folder(&self, id: &str, path: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        let state = self.lock();
        if !state.containers.iter().any(|c| c.id == id) {
            return Err(no_such(id));
        }
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let files: BTreeMap<String, Vec<u8>> = state
            .container_files
            .iter()
            .filter(|((c, _), _)| c == id)
            .filter_map(|((_, p), content)| {
                let name = p.strip_prefix(&prefix)?;
                (!name.contains('/')).then(|| (name.to_string(), content.clone()))
            })
            .collect();
        Ok((!files.is_empty()).then_some(files))
    }

    async fn write_file(&self, id: &str, folder: &str, name: &str, content: &[u8]) -> Result<()> {
        let mut state = self.lock();
        if !state.containers.iter().any(|c| c.id == id) {
            return Err(no_such(id));
        }
        let path = format!("{}/{name}", folder.trim_end_matches('/'));
        state.calls.push(format!("write {id} {path}"));
        state
            .container_files
            .insert((id.to_string(), path), content.to_vec());
        Ok(())
    }

    async fn copy_tree(&self, id: &str, tree: &crate::engine::TreeCopy) -> Result<()> {
        let mut state = self.lock();
        if !state.containers.iter().any(|c| c.id == id) {
            return Err(no_such(id));
        }
        let into = tree.into.trim_end_matches('/');
        state.calls.push(format!(
            "copy {id} {into} {}:{} {}",
            tree.uid,
            tree.gid,
            tree.entries.len()
        ));
        for entry in &tree.entries {
            if let Some(content) = &entry.content {
                let path = format!("{into}/{}", entry.path);
                state
                    .container_files
                    .insert((id.to_string(), path), content.clone());
            }
        }
        Ok(())
    }

    async fn read_image_file(&self, image: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let state = self.lock();
        let Some(id) = find_image(&state.images, image).map(|i| i.id.clone()) else {
            return Err(EngineError::InvalidReference {
                reference: image.to_string(),
                message: "the fake engine has no such image".to_string(),
            });
        };
        Ok(state.image_files.get(&(id, path.to_string())).cloned())
    }
}
