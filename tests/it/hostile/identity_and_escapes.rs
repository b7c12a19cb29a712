//! Hostile repositories: see `super`.

/// Class 8 of the issue: other network namespaces and networks, published ports, unbounded
/// inputs and in-memory file systems (spec-notes 0430–0433). Each refusal is checked by
/// `docker ps -a` on the workspace's label (nothing created), each grant by `docker inspect`.
mod escapes {
    use std::path::Path;
    use std::process::Output;
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use crate::support::docker::{BUSYBOX_IMAGE, TestContainer, engine_ready};
    use crate::support::engine::docker;
    use crate::support::hostile::{HostTarget, HostileRepo};
    use crate::support::{devcell, free_port, unique};

    /// A committed hostile repository whose `devcontainer.json` is `config` (`IMAGE` replaced
    /// by the test image; no uid layer, so nothing but the container is made); every container
    /// labelled with its folder is removed on drop.
    struct Attack {
        repo: HostileRepo,
    }

    impl Attack {
        fn new(config: &str) -> Attack {
            let repo = HostileRepo::new();
            repo.config(&config.replace("IMAGE", BUSYBOX_IMAGE))
                .commit();
            Attack { repo }
        }

        fn path(&self) -> &Path {
            self.repo.path()
        }

        /// `devcell up --workspace-folder <repo> <args…>`, killed after 60 s.
        fn up(&self, args: &[&str]) -> Output {
            devcell()
                .arg("up")
                .arg("--workspace-folder")
                .arg(self.path())
                .args(args)
                .timeout(Duration::from_secs(60))
                .output()
                .expect("devcell runs")
        }

        /// `up` that must succeed: its result line.
        fn up_ok(&self, args: &[&str]) -> Value {
            let out = self.up(args);
            assert!(
                out.status.success(),
                "up failed: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            let result = last_json(&out);
            assert_eq!(result["outcome"], "success", "{result}");
            result
        }

        /// `up` that must be refused: exit 1, the text names every `wanted`, and no container
        /// carries the workspace's label. Returns the text.
        fn up_refused(&self, args: &[&str], wanted: &[&str]) -> String {
            let out = self.up(args);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(1), "{text}");
            assert!(!text.contains("panicked"), "{text}");
            for w in wanted {
                assert!(text.contains(w), "missing `{w}` in {text}");
            }
            assert!(
                self.containers().is_empty(),
                "a container was created: {text}"
            );
            text
        }

        /// `docker ps -a` ids labelled with this workspace folder.
        fn containers(&self) -> Vec<String> {
            let (ok, out) = docker(&[
                "ps",
                "-aq",
                "--no-trunc",
                "--filter",
                &format!("label=devcontainer.local_folder={}", self.path().display()),
            ]);
            assert!(ok, "{out}");
            out.lines().map(str::to_string).collect()
        }
    }

    impl Drop for Attack {
        fn drop(&mut self) {
            for id in self.containers() {
                let _ = docker(&["rm", "-f", "-v", &id]);
            }
        }
    }

    fn last_json(out: &Output) -> Value {
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}"))
    }

    fn inspect(id: &str, format: &str) -> String {
        let (ok, out) = docker(&["inspect", "-f", format, id]);
        assert!(ok, "{out}");
        out.trim().to_string()
    }

    /// The request for `permission` in the `up` result, which must be granted with `grant`.
    fn assert_granted(result: &Value, permission: &str, value: &str) {
        let found = result["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["permission"] == permission && p["value"] == value)
            .unwrap_or_else(|| panic!("no {permission} {value} in {result}"))
            .clone();
        assert_eq!(found["status"], "granted", "{found}");
        assert_eq!(
            found["grant"],
            format!(
                "--allow {}:{value}",
                if permission == "network" {
                    "network"
                } else {
                    "publish"
                }
            )
        );
    }

    /// A docker network made for one test, removed on drop.
    struct TestNetwork(String);

    impl Drop for TestNetwork {
        fn drop(&mut self) {
            let _ = docker(&["network", "rm", &self.0]);
        }
    }

    #[test]
    fn other_network_namespaces_and_named_networks_are_requests() {
        if !engine_ready(
            "other_network_namespaces_and_named_networks_are_requests",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let host = HostTarget::new();
        // Another container (someone else's workspace) whose namespace the attacker wants.
        let victim = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
        let name = inspect(&victim.id, "{{.Name}}");
        let name = name.trim_start_matches('/');
        for (run_args, mode) in [
            (
                format!(r#""--network", "container:{name}""#),
                format!("container:{name}"),
            ),
            (
                format!(r#""--network=container:{name}""#),
                format!("container:{name}"),
            ),
            (
                format!(r#""--net", "container:{}""#, victim.id),
                format!("container:{}", victim.id),
            ),
            (
                format!(r#""--net=container:{name}""#),
                format!("container:{name}"),
            ),
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "runArgs": [{run_args}]}}"#
            ));
            attack.up_refused(
                &[],
                &[
                    &format!("network `{mode}`"),
                    &format!("--allow network:{mode}"),
                ],
            );
            // The grant does what it asks: the container shares the victim's namespace.
            let result = attack.up_ok(&["--allow", &format!("network:{mode}")]);
            let id = result["containerId"].as_str().unwrap();
            assert_eq!(
                inspect(id, "{{.HostConfig.NetworkMode}}"),
                format!("container:{}", victim.id),
                "{mode}"
            );
            assert_granted(&result, "network", &mode);
            // A grant for another container does not cover it.
            let again = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "runArgs": [{run_args}]}}"#
            ));
            again.up_refused(&["--allow", "network:container:someone-else"], &[&mode]);
        }

        // A named network.
        let net = TestNetwork(unique("devcell-test-net"));
        let (ok, out) = docker(&["network", "create", "--label", "devcell.test=1", &net.0]);
        assert!(ok, "{out}");
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "runArgs": ["--network", "{}"]}}"#,
            net.0
        ));
        attack.up_refused(&[], &[&format!("--allow network:{}", net.0)]);
        let result = attack.up_ok(&["--allow", &format!("network:{}", net.0)]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(inspect(id, "{{.HostConfig.NetworkMode}}"), net.0);
        assert_granted(&result, "network", &net.0);

        // The other namespaces cannot be shared at all, nor every port published.
        for flag in [
            r#""--pid", "host""#,
            r#""--pid=container:x""#,
            r#""--ipc=host""#,
            r#""--uts", "host""#,
            r#""--userns=host""#,
            r#""--cgroupns", "host""#,
            r#""-P""#,
            r#""--publish-all""#,
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "runArgs": [{flag}]}}"#
            ));
            attack.up_refused(&[], &["unsupported `runArgs` flag"]);
        }
        host.assert_untouched();
    }

    /// The engine's bridge address (its gateway, or the subnet's first address, which the
    /// engine gives its bridge when IPAM names no gateway): a non-loopback host address tests
    /// may bind.
    fn bridge_gateway() -> String {
        let (ok, out) = docker(&[
            "network",
            "inspect",
            "bridge",
            "-f",
            "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}}{{end}}",
        ]);
        assert!(ok, "{out}");
        let mut parts = out.split_whitespace();
        let first = parts.next().unwrap_or_default();
        let gateway = match first.split_once('/') {
            // No gateway: `first` is the subnet.
            Some((net, _)) => {
                let mut ip: std::net::Ipv4Addr = net.parse().unwrap();
                ip = std::net::Ipv4Addr::from(u32::from(ip) + 1);
                ip.to_string()
            }
            None => first.to_string(),
        };
        let ip: std::net::IpAddr = gateway.parse().unwrap_or_else(|_| panic!("{out}"));
        assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
        gateway
    }

    #[test]
    fn published_ports_stay_on_loopback_unless_granted() {
        if !engine_ready(
            "published_ports_stay_on_loopback_unless_granted",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let (p1, p2, p3, p4) = (free_port(), free_port(), free_port(), free_port());
        // No host address: the engine would publish on every interface; devcell uses loopback.
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "appPort": [{p1}, "{p2}:81"],
                "runArgs": ["-p", "{p3}:80", "--publish=82"]}}"#
        ));
        let result = attack.up_ok(&[]);
        let id = result["containerId"].as_str().unwrap();
        let bindings: Value =
            serde_json::from_str(&inspect(id, "{{json .HostConfig.PortBindings}}")).unwrap();
        let mut seen = Vec::new();
        for (port, list) in bindings.as_object().unwrap() {
            for b in list.as_array().unwrap() {
                seen.push(format!(
                    "{}:{}->{port}",
                    b["HostIp"].as_str().unwrap(),
                    b["HostPort"].as_str().unwrap()
                ));
            }
        }
        seen.sort();
        let mut want = vec![
            format!("127.0.0.1:{p1}->{p1}/tcp"),
            format!("127.0.0.1:{p2}->81/tcp"),
            format!("127.0.0.1:{p3}->80/tcp"),
            "127.0.0.1:->82/tcp".to_string(),
        ];
        want.sort();
        assert_eq!(seen, want, "{bindings}");
        // What the engine actually bound: loopback only.
        let (ok, ports) = docker(&["port", id]);
        assert!(ok, "{ports}");
        assert!(!ports.is_empty());
        for line in ports.lines() {
            assert!(line.contains("-> 127.0.0.1:"), "{ports}");
        }
        assert!(
            result["devcell"]["permissions"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{result}"
        );

        // Every interface, in each spelling: refused, nothing created.
        for (config, value) in [
            (
                format!(r#""appPort": ["0.0.0.0:{p4}:80"]"#),
                format!("0.0.0.0:{p4}"),
            ),
            (
                format!(r#""runArgs": ["-p", "0.0.0.0:{p4}:80"]"#),
                format!("0.0.0.0:{p4}"),
            ),
            (
                format!(r#""runArgs": ["--publish=[::]:{p4}:80"]"#),
                format!("[::]:{p4}"),
            ),
            (
                r#""runArgs": ["-p0.0.0.0::80/udp"]"#.to_string(),
                "0.0.0.0:*".to_string(),
            ),
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false, {config}}}"#
            ));
            attack.up_refused(&[], &[&format!("--allow publish:{value}")]);
        }

        // Granted on another address than loopback (the engine's bridge, never every
        // interface): published there, and reported.
        let gateway = bridge_gateway();
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "runArgs": ["-p", "{gateway}:{p4}:80"]}}"#
        ));
        attack.up_refused(&[], &[&format!("--allow publish:{gateway}:{p4}")]);
        attack.up_refused(&["--allow", &format!("publish:{gateway}:{}", p4 ^ 1)], &[]);
        let result = attack.up_ok(&["--allow", &format!("publish:{gateway}:*")]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            inspect(
                id,
                "{{range $p, $b := .HostConfig.PortBindings}}{{range $b}}{{.HostIp}}:{{.HostPort}}{{end}}{{end}}"
            ),
            format!("{gateway}:{p4}")
        );
        assert_granted(&result, "publishPort", &format!("{gateway}:{p4}"));
    }

    /// Runs `devcell <args…>` with a 30 s kill switch; returns (output, elapsed).
    fn timed(args: &[&str]) -> (Output, Duration) {
        let start = Instant::now();
        let out = devcell()
            .args(args)
            .timeout(Duration::from_secs(30))
            .output()
            .expect("devcell runs");
        (out, start.elapsed())
    }

    #[test]
    fn unbounded_inputs_fail_fast_with_a_clear_error() {
        if !engine_ready(
            "unbounded_inputs_fail_fast_with_a_clear_error",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let attack = Attack::new(
            r#"{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false}"#,
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("secrets.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o600)).unwrap();
        let silent = dir.path().join("silent.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &silent, rustix::fs::Mode::from(0o600)).unwrap();
        // A writer that holds the FIFO open and never writes.
        let _writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&silent)
            .unwrap();
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(100 << 20)
            .unwrap();
        let ws = attack.path().to_str().unwrap();
        for (file, wanted) in [
            (
                Path::new("/dev/zero"),
                "is a character device, not a regular file",
            ),
            (fifo.as_path(), "the file is empty"),
            (
                silent.as_path(),
                "is a pipe whose writer sent no end of file",
            ),
            (big.as_path(), "is larger than 4194304 bytes (4 MiB)"),
        ] {
            for command in ["up", "run-user-commands", "exec"] {
                let mut args = vec![command, "--workspace-folder", ws, "--secrets-file"];
                args.push(file.to_str().unwrap());
                if command == "exec" {
                    args.push("true");
                }
                let (out, took) = timed(&args);
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    !out.status.success(),
                    "{command} {}: {text}",
                    file.display()
                );
                assert!(took < Duration::from_secs(15), "{command} took {took:?}");
                assert!(
                    text.contains(&format!("cannot use secrets file `{}`", file.display())),
                    "{text}"
                );
                assert!(
                    text.contains(wanted),
                    "{command} {}: {text}",
                    file.display()
                );
                assert!(!text.contains("panicked"), "{text}");
            }
        }
        assert!(attack.containers().is_empty(), "a container was created");

        // The same bound for devcontainer.json: named by the user (`--config`), or committed
        // by the repository as a symlink to a device.
        for file in [Path::new("/dev/zero"), fifo.as_path(), big.as_path()] {
            let (out, took) = timed(&[
                "read-configuration",
                "--workspace-folder",
                ws,
                "--config",
                file.to_str().unwrap(),
            ]);
            assert!(!out.status.success());
            assert!(took < Duration::from_secs(15), "{took:?}");
        }
        let repo = HostileRepo::new();
        repo.symlink(".devcontainer/devcontainer.json", "/dev/zero")
            .commit();
        let (out, took) = timed(&["up", "--workspace-folder", repo.path().to_str().unwrap()]);
        assert!(!out.status.success());
        assert!(took < Duration::from_secs(15), "{took:?}");
        // The user's settings file too.
        let (out, took) = timed(&["up", "--workspace-folder", ws, "--config-file", "/dev/zero"]);
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success());
        assert!(text.contains("not a regular file"), "{text}");
        assert!(took < Duration::from_secs(15), "{took:?}");
        assert!(attack.containers().is_empty(), "a container was created");
    }

    #[test]
    fn shm_and_tmpfs_sizes_are_bounded_by_the_memory_limit() {
        if !engine_ready(
            "shm_and_tmpfs_sizes_are_bounded_by_the_memory_limit",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let config = r#"{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
            "runArgs": ["--shm-size", "100g", "--tmpfs", "/x:size=100g", "--tmpfs", "/y",
                        "--mount", "type=tmpfs,target=/z,tmpfs-size=100g",
                        "--mount", "type=tmpfs,target=/w,tmpfs-size=8m"]}"#;
        let attack = Attack::new(config);
        let result = attack.up_ok(&[]);
        let id = result["containerId"].as_str().unwrap();
        let gib4 = (4_i64 << 30).to_string();
        assert_eq!(inspect(id, "{{.HostConfig.ShmSize}}"), gib4);
        assert_eq!(
            inspect(id, r#"{{index .HostConfig.Tmpfs "/x"}}"#),
            "size=4g"
        );
        assert_eq!(
            inspect(id, r#"{{index .HostConfig.Tmpfs "/y"}}"#),
            "size=1g"
        );
        let mounts: Value =
            serde_json::from_str(&inspect(id, "{{json .HostConfig.Mounts}}")).unwrap();
        let size = |target: &str| {
            mounts
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["Target"] == target)
                .unwrap_or_else(|| panic!("no {target} in {mounts}"))["TmpfsOptions"]["SizeBytes"]
                .as_i64()
        };
        assert_eq!(size("/z"), Some(4 << 30));
        assert_eq!(size("/w"), Some(8 << 20), "a smaller request is kept");
        // From inside: what the kernel mounted (1 KiB blocks).
        let (ok, df) = docker(&["exec", id, "df", "-k", "/dev/shm", "/x", "/y", "/z", "/w"]);
        assert!(ok, "{df}");
        let sizes: Vec<&str> = df
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        assert_eq!(
            sizes,
            ["4194304", "4194304", "1048576", "4194304", "8192"],
            "{df}"
        );

        // A lower memory limit (the user's) lowers them all.
        let small = Attack::new(config);
        let result = small.up_ok(&["--memory", "512m"]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            inspect(id, "{{.HostConfig.ShmSize}}"),
            (512_i64 << 20).to_string()
        );
        assert_eq!(
            inspect(id, r#"{{index .HostConfig.Tmpfs "/y"}}"#),
            "size=512m"
        );
        assert_eq!(
            inspect(id, r#"{{index .HostConfig.Tmpfs "/tmp"}}"#),
            "rw,nosuid,nodev,exec,size=512m,mode=1777"
        );

        // reference: as written.
        let reference = Attack::new(config);
        let result = reference.up_ok(&["--security-profile", "reference"]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            inspect(id, "{{.HostConfig.ShmSize}}"),
            (100_i64 << 30).to_string()
        );
        assert_eq!(inspect(id, r#"{{index .HostConfig.Tmpfs "/y"}}"#), "");
    }

    /// `devcell handoff --workspace-folder <repo> --agent a --format json <extra…>` with a
    /// settings file naming agent `a` (`true`), a fake home and state folder under `home`.
    fn handoff(repo: &Path, home: &Path, extra: &[&str]) -> (Option<i32>, Value) {
        let settings = home.join("config.toml");
        std::fs::write(&settings, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
        let out = devcell()
            .env("HOME", home)
            .env("DEVCELL_STATE_DIR", home.join("state"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .args(["handoff", "--workspace-folder"])
            .arg(repo)
            .args(["--agent", "a", "--format", "json", "--config-file"])
            .arg(&settings)
            .args(extra)
            .timeout(Duration::from_secs(120))
            .output()
            .expect("devcell runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    }

    /// `(permission, value, status)` of each request in `v`, sorted.
    fn listed(v: &Value) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = v
            .as_array()
            .unwrap_or_else(|| panic!("requests: {v}"))
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                (s("permission"), s("value"), s("status"))
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_handoff_plan_judges_networks_and_ports_as_the_handoff_does() {
        if !engine_ready(
            "the_handoff_plan_judges_networks_and_ports_as_the_handoff_does",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let victim = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
        let port = free_port();
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "appPort": ["0.0.0.0:{port}:80"],
                "runArgs": ["--network", "container:{}"]}}"#,
            victim.id
        ));
        let home = tempfile::tempdir().unwrap();
        let network = format!("container:{}", victim.id);
        let address = format!("0.0.0.0:{port}");
        let want = |status: &str| {
            vec![
                ("network".to_string(), network.clone(), status.to_string()),
                (
                    "publishPort".to_string(),
                    address.clone(),
                    status.to_string(),
                ),
            ]
        };
        // With the bridge (`--network default`) the configuration's network stands: both are
        // requests, in the plan exactly as in the handoff, and nothing is created.
        let (plan_code, plan) = handoff(
            attack.path(),
            home.path(),
            &["--network", "default", "--plan"],
        );
        let (code, real) = handoff(attack.path(), home.path(), &["--network", "default"]);
        assert_eq!(code, Some(12), "{real}");
        assert_eq!(plan_code, code, "{plan}");
        assert_eq!(real["error"]["code"], "permission_required");
        assert_eq!(
            listed(&plan["error"]["details"]["permissions"]),
            want("refused")
        );
        assert_eq!(
            listed(&real["error"]["details"]["permissions"]),
            want("refused")
        );
        assert!(attack.containers().is_empty(), "a container was created");
        // Granted: the plan says so.
        let grants = [
            "--network",
            "default",
            "--plan",
            "--allow",
            &format!("network:{network}"),
            "--allow",
            &format!("publish:{address}"),
        ];
        let (code, plan) = handoff(attack.path(), home.path(), &grants);
        assert_eq!(code, Some(0), "{plan}");
        assert_eq!(
            listed(&plan["result"]["permissions"]),
            want("granted"),
            "{plan}"
        );
        assert!(
            attack.containers().is_empty(),
            "the plan created a container"
        );
    }
}
