//! Builds devcell's two in-container executables, std only, as static executables for the
//! target, embedded with `include_bytes!`: they must run inside any image (busybox, glibc, musl)
//! without a loader or libraries.
//! - the egress forwarder (`src/egress/forwarder_main.rs`, embedded by `egress::channel`);
//! - `devcell-mail`, the mail channel's dumb pipe (`src/handoff/door/client_main.rs` with its
//!   `frame.rs`, embedded by `handoff::door::channel`).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    static_bin(
        "src/egress/forwarder_main.rs",
        &[],
        "devcell_egress_forwarder",
        "devcell-egress-forwarder",
    );
    static_bin(
        "src/handoff/door/client_main.rs",
        &["src/handoff/door/frame.rs"],
        "devcell_mail",
        "devcell-mail",
    );
}

/// Compiles the std-only crate rooted at `src` (its modules `deps`) into `$OUT_DIR/out`.
fn static_bin(src: &str, deps: &[&str], crate_name: &str, out: &str) {
    println!("cargo:rerun-if-changed={src}");
    for dep in deps {
        println!("cargo:rerun-if-changed={dep}");
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join(out);
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let status = Command::new(&rustc)
        .args([
            "--edition=2024",
            "--crate-type=bin",
            &format!("--crate-name={crate_name}"),
            "--target",
            &target,
            "-C",
            "opt-level=s",
            "-C",
            "strip=symbols",
            "-C",
            "panic=abort",
            "-C",
            "codegen-units=1",
            "-C",
            "target-feature=+crt-static",
            "-o",
        ])
        .arg(&out)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("rustc runs for {crate_name}: {e}"));
    assert!(status.success(), "building {crate_name} failed");
}
