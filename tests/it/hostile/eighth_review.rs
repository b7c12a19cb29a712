//! Engine reproductions of the eighth attacker's findings (spec-note 0400, "Attacks found by
//! the eighth review"). Each asserts on the host: the marker a host program would write is
//! absent.

use super::compose_projects::{own_project, project_containers};
use crate::support::context::docker_lines;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::hostile::{HostTarget, HostileRepo};

/// H7: after `up`, the agent (or any hook) adds a `provider` service to the workspace's
/// Compose file whose `type` is a script it wrote in the workspace. Compose runs a
/// provider's program on `down` (any path); `devcell down --remove` must not run Compose on
/// those files: the project's containers and networks go through the engine, and the
/// marker the script would write never appears.
#[test]
fn down_runs_no_provider_the_agent_added() {
    let Some(repo) = HostileRepo::busybox("hostile_h7_down_provider") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    let app = format!(
        "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
         volumes: [\"..:/workspace\"]\n"
    );
    repo.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody",
            "workspaceFolder": "/workspace"}"#,
    )
    .file(".devcontainer/docker-compose.yml", &app)
    .commit();
    let up = repo.context().run("up", &["--network", "none"]);
    assert_eq!(up.code, Some(0), "{}\n{}", up.stdout, up.stderr);
    assert_eq!(project_containers(&project).len(), 1);

    // what the agent writes through its workspace after `up` judged the files
    let script = repo.path().join(".devcontainer/x.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\necho '{{\"type\":\"info\",\"message\":\"ok\"}}'\n",
            target.marker().display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        repo.path().join(".devcontainer/docker-compose.yml"),
        format!(
            "{app}  p:\n    provider:\n      type: {}\n",
            script.display()
        ),
    )
    .unwrap();

    let down = repo.context().run("down", &["--remove"]);
    assert_eq!(down.code, Some(0), "{}\n{}", down.stdout, down.stderr);
    assert!(
        !target.marker().exists(),
        "a host program ran: {:?}",
        std::fs::read_to_string(target.marker())
    );
    assert!(project_containers(&project).is_empty());
    // the project's network went too, through the engine
    let filter = format!("label=com.docker.compose.project={project}");
    assert!(
        docker_lines(&["network", "ls", "-q", "--filter", &filter]).is_empty(),
        "the project's network stays"
    );
    target.assert_untouched();
}
