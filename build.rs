//! Builds devcell's egress forwarder (`src/egress/forwarder_main.rs`, std only) as a static
//! executable for the target, embedded by `egress::channel` with `include_bytes!`: it must run
//! inside any image (busybox, glibc, musl) without a loader or libraries.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "src/egress/forwarder_main.rs";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("devcell-egress-forwarder");
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let status = Command::new(&rustc)
        .args([
            "--edition=2024",
            "--crate-type=bin",
            "--crate-name=devcell_egress_forwarder",
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
        .expect("rustc runs for the egress forwarder");
    assert!(status.success(), "building the egress forwarder failed");
}
