//! git and image helpers shared by the handoff tests: git with a fixed identity and no user
//! config, and the `hostgit` test image (busybox plus this host's git).

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support;

/// The uid and gid test workspaces are given to (`chown -R`) so that they belong to a non-root
/// user other than the container's: devcell, run as root, then maps the remote user to it
/// (spec-note 0250).
pub const WORKSPACE_OWNER: u32 = 4242;

/// `chown -R WORKSPACE_OWNER:WORKSPACE_OWNER <path>` (panics on failure).
pub fn give_to_workspace_owner(path: &Path) {
    let ids = format!("{WORKSPACE_OWNER}:{WORKSPACE_OWNER}");
    let status = Command::new("chown")
        .args(["-R", &ids])
        .arg(path)
        .status()
        .expect("chown runs");
    assert!(status.success(), "chown -R {ids} {}", path.display());
}

/// The owner uid of `path` (not following a final symbolic link).
pub fn owner_uid(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .uid()
}

/// Runs git in `dir` with a fixed identity and no global/system config; panics with stderr on
/// failure; returns trimmed stdout. Repositories owned by another user (tests run as root and
/// hand their workspaces to [`WORKSPACE_OWNER`]) pass git's ownership check
/// (`safe.directory=*`, command-line configuration).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=devcell test",
            "-c",
            "user.email=test@devcell.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "safe.directory=*",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Builds (once per run, cached by Docker) `devcell-test/hostgit:1`: the busybox base image plus
/// this host's `git` binary and the shared libraries `ldd` lists, so git can run in a container
/// without any registry or network.
pub fn hostgit_image() -> &'static str {
    const IMAGE: &str = "devcell-test/hostgit:1";
    let ctx = tempfile::tempdir().unwrap();
    let rootfs = ctx.path().join("rootfs");
    let git_bin = PathBuf::from(
        String::from_utf8(
            Command::new("sh")
                .args(["-c", "command -v git"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    );
    let ldd = Command::new("ldd")
        .arg(&git_bin)
        .output()
        .expect("ldd runs");
    assert!(ldd.status.success(), "ldd git failed");
    let mut files = vec![git_bin.clone()];
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
        let path = line
            .split("=>")
            .last()
            .and_then(|p| p.split_whitespace().next())
            .unwrap_or("");
        if path.starts_with('/') {
            files.push(PathBuf::from(path));
        }
    }
    for f in &files {
        let dest = rootfs.join(f.strip_prefix("/").unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(f, &dest).unwrap(); // follows symlinks: the real library under the ldd name
    }
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!(
            "FROM {}\nCOPY rootfs/ /\nENV PATH={}:/bin:/usr/bin\n",
            support::docker::BUSYBOX_IMAGE,
            git_bin.parent().unwrap().display()
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

/// [`hostgit_image`] pushed to the local registry (`DEVCELL_TEST_REGISTRY`) and named by
/// digest (once per process), so the audit can count it as pinned; `None` without a registry.
pub fn pinned_hostgit_image() -> Option<&'static str> {
    static IMAGE: OnceLock<Option<String>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let registry = std::env::var("DEVCELL_TEST_REGISTRY").ok()?;
            let local = hostgit_image();
            let repo = format!("{registry}/devcell-test/hostgit");
            let tagged = format!("{repo}:1");
            for args in [vec!["tag", local, &tagged], vec!["push", &tagged]] {
                let out = Command::new("docker")
                    .args(&args)
                    .bounded_output()
                    .expect("docker runs");
                assert!(
                    out.status.success(),
                    "docker {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let out = Command::new("docker")
                .args([
                    "image",
                    "inspect",
                    "--format",
                    "{{json .RepoDigests}}",
                    &tagged,
                ])
                .bounded_output()
                .expect("docker runs");
            let digests: Vec<String> = serde_json::from_slice(&out.stdout).unwrap_or_default();
            digests
                .into_iter()
                .find(|d| d.starts_with(&format!("{repo}@sha256:")))
        })
        .as_deref()
}
