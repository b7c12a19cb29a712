//! Hostile repositories: see `super`. An image's `devcontainer.metadata` label is the image's
//! (a repository's Dockerfile, a pulled image), not the user's: `set-up` of a container made
//! from it judges the host variables the label names like `up` judges devcontainer.json's
//! (spec-note 0440).

use std::process::Output;

use crate::support::{
    self,
    docker::{BUSYBOX_IMAGE, TestContainer},
};

const SECRET: &str = "devcell-label-secret-5f1c";

fn set_up(container: &str, args: &[&str]) -> Output {
    support::devcell()
        .env("DEVCELL_LABEL_TOKEN", SECRET)
        .args(["set-up", "--container-id", container])
        .args(args)
        .output()
        .expect("devcell runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn set_up_judges_the_host_variables_an_image_label_names() {
    if !support::docker::engine_ready(
        "set_up_judges_the_host_variables_an_image_label_names",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let label = r#"devcontainer.metadata=[{"remoteEnv": {"T": "${localEnv:DEVCELL_LABEL_TOKEN}"}, "postCreateCommand": "echo \"got:$T\" > /tmp/leak"}]"#;
    let container = TestContainer::run_with(&["--label", label], BUSYBOX_IMAGE, &["sleep", "600"]);

    let refused = set_up(&container.id, &[]);
    let shown = text(&refused);
    assert!(!refused.status.success(), "refused: {shown}");
    assert!(
        shown.contains("--allow env:DEVCELL_LABEL_TOKEN"),
        "names the grant: {shown}"
    );
    assert!(!shown.contains(SECRET), "the value is never shown: {shown}");
    assert_eq!(
        container.sh("cat /tmp/leak 2>/dev/null || echo absent"),
        "absent\n",
        "no hook ran, nothing crossed"
    );

    // granted, the variable crosses and the hook runs
    let granted = set_up(&container.id, &["--allow", "env:DEVCELL_LABEL_TOKEN"]);
    assert!(granted.status.success(), "{}", text(&granted));
    assert_eq!(container.sh("cat /tmp/leak"), format!("got:{SECRET}\n"));
}
