//! Docker engine helpers for integration tests: the engine gate and throwaway containers.
//!
//! Engine tests must fail (not skip) when `DEVCELL_TEST_ENGINE=1` and the engine or the base
//! image is missing; without the variable they return early with a note on stderr.

use crate::support::deadline::Bounded as _;
use std::path::Path;
use std::process::Command;

/// The tiny base image built by `scripts/base-images`.
pub const BUSYBOX_IMAGE: &str = "devcell-test/busybox:1";

/// Whether engine tests should run. Panics when `DEVCELL_TEST_ENGINE=1` but `docker info`
/// fails or `image` is missing; returns `false` (with a note on stderr) when the variable is
/// unset and the engine or image is unavailable.
pub fn engine_ready(test: &str, image: &str) -> bool {
    let required = std::env::var("DEVCELL_TEST_ENGINE").is_ok_and(|v| v == "1");
    let engine = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .bounded_output()
        .is_ok_and(|o| o.status.success());
    let image_present = engine
        && Command::new("docker")
            .args(["image", "inspect", image])
            .bounded_output()
            .is_ok_and(|o| o.status.success());
    if engine && image_present {
        return true;
    }
    let what = if engine {
        format!("image `{image}` is missing (run scripts/base-images)")
    } else {
        "no Docker engine is reachable".to_string()
    };
    assert!(!required, "{test}: DEVCELL_TEST_ENGINE=1 but {what}");
    #[allow(clippy::print_stderr)]
    {
        eprintln!("note: {test} skipped: {what} (set DEVCELL_TEST_ENGINE=1 to require it)");
    }
    false
}

/// The gate of tests that never run by default (they push to the local registry): `false`,
/// with a note, unless `DEVCELL_TEST_ENGINE=1`; then the engine, `image` and
/// `DEVCELL_TEST_REGISTRY` must be there (panics otherwise, as [`engine_ready`] does).
pub fn engine_opt_in(test: &str, image: &str) -> bool {
    if std::env::var("DEVCELL_TEST_ENGINE").as_deref() != Ok("1") {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("note: {test} skipped: DEVCELL_TEST_ENGINE is not 1");
        }
        return false;
    }
    assert!(engine_ready(test, image));
    assert!(
        super::test_registry().is_some(),
        "{test}: DEVCELL_TEST_ENGINE=1 but DEVCELL_TEST_REGISTRY is not set"
    );
    true
}

/// A container started with `docker run -d <image> <args…>`, force-removed on drop (also when
/// the test panics). Not `--rm`: Podman removes such a container when `docker restart` stops
/// it, and [`TestContainer::restart`] then fails ("container has already been removed").
pub struct TestContainer {
    /// The container id.
    pub id: String,
}

impl TestContainer {
    /// Starts a detached container.
    pub fn run(image: &str, args: &[&str]) -> TestContainer {
        let out = Command::new("docker")
            .args(["run", "-d", "--label", "devcell.test=1", image])
            .args(args)
            .bounded_output()
            .expect("docker runs");
        assert!(
            out.status.success(),
            "docker run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        TestContainer {
            id: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        }
    }

    /// Starts a detached container with extra `docker run` options.
    pub fn run_with(options: &[&str], image: &str, args: &[&str]) -> TestContainer {
        let out = Command::new("docker")
            .args(["run", "-d", "--label", "devcell.test=1"])
            .args(options)
            .arg(image)
            .args(args)
            .bounded_output()
            .expect("docker runs");
        assert!(
            out.status.success(),
            "docker run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        TestContainer {
            id: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        }
    }

    /// `docker inspect -f <format>` of the container, trimmed.
    pub fn inspect(&self, format: &str) -> String {
        let out = Command::new("docker")
            .args(["inspect", "-f", format, &self.id])
            .bounded_output()
            .expect("docker runs");
        assert!(out.status.success(), "docker inspect failed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Runs `argv` in the container as root and returns stdout (panics on failure).
    pub fn sh(&self, script: &str) -> String {
        let out = Command::new("docker")
            .args(["exec", &self.id, "/bin/sh", "-c", script])
            .bounded_output()
            .expect("docker runs");
        assert!(
            out.status.success(),
            "`{script}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Restarts the container immediately (`docker restart -t 0`).
    pub fn restart(&self) {
        let status = Command::new("docker")
            .args(["restart", "-t", "0", &self.id])
            .bounded_output()
            .expect("docker runs")
            .status;
        assert!(status.success(), "docker restart failed");
        // `docker restart` can return before the engine accepts execs again (seen under load:
        // the first exec failed with no message). Wait, bounded, until one succeeds.
        for _ in 0..100 {
            let ready = Command::new("docker")
                .args(["exec", &self.id, "true"])
                .bounded_output()
                .is_ok_and(|o| o.status.success());
            if ready {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("container {} accepts no exec after restart", self.id);
    }
}

impl Drop for TestContainer {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", "-v", &self.id])
            .bounded_output();
    }
}

/// Builds (cached by Docker; nothing is pulled) `devcell-test/debianlike:1` from
/// [`BUSYBOX_IMAGE`]: a non-root user `dev` (uid 1000, shell `/bin/sh`), an `/etc/profile` that
/// resets `PATH` exactly as Debian's does (root gets the `sbin` folders, users do not), and an
/// image `ENV PATH` entry `/opt/image/bin` holding `imagetool` (prints `image-tool-ran`).
pub fn debian_like_image() -> &'static str {
    const IMAGE: &str = "devcell-test/debianlike:1";
    // Debian's /etc/profile (base-files), the lines that set PATH.
    const PROFILE: &str = r#"if [ "$(id -u)" -eq 0 ]; then
  PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
else
  PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
fi
export PATH
"#;
    let ctx = tempfile::tempdir().unwrap();
    std::fs::write(ctx.path().join("profile"), PROFILE).unwrap();
    std::fs::write(
        ctx.path().join("imagetool"),
        "#!/bin/sh\necho image-tool-ran\n",
    )
    .unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!(
            "FROM {BUSYBOX_IMAGE}\n\
             COPY profile /etc/profile\n\
             COPY imagetool /opt/image/bin/imagetool\n\
             RUN chmod 755 /opt/image/bin/imagetool && mkdir -p /home/dev \
             && echo 'dev:x:1000:1000:dev:/home/dev:/bin/sh' >> /etc/passwd \
             && echo 'dev:x:1000:' >> /etc/group && chown 1000:1000 /home/dev\n\
             ENV PATH=/opt/image/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        ),
    )
    .unwrap();
    let out = Command::new("docker")
        .args(["build", "-q", "-t", IMAGE])
        .arg(ctx.path())
        .bounded_output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker build of {IMAGE} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    IMAGE
}

/// Every container (running or not) labelled with `ws` as its local folder, by full id.
pub fn containers_of(ws: &Path) -> Vec<String> {
    let filter = format!("label=devcontainer.local_folder={}", ws.display());
    let out = Command::new("docker")
        .args(["ps", "-aq", "--no-trunc", "--filter", &filter])
        .bounded_output()
        .expect("docker runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The host paths a container mounts (`docker inspect`'s `Mounts[].Source`).
pub fn mount_sources(id: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["inspect", "--format", "{{json .Mounts}}", id])
        .bounded_output()
        .expect("docker runs");
    let mounts: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    mounts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["Source"].as_str().map(str::to_string))
        .collect()
}
