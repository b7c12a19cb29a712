//! The fetch-back budget (`[handoff] fetch_back_max_bytes`, spec-note 0437): a clone task whose
//! objects are over it is not fetched; the user's repository is untouched until the user
//! raises the budget and fetches.

use super::{Host, ok, snapshot, source_repo, user_refs};
use crate::support;
use crate::support::docker::engine_ready;
use crate::support::git::git;
use crate::support::hostile::HostTarget;

/// The agent commits 512 KiB that do not compress.
const BIG_COMMIT: &str = "set -e; head -c 524288 /dev/urandom > big; git add big; \
     git -c user.name=agent -c user.email=agent@devcell.invalid -c commit.gpgsign=false \
     commit -q -m big";

/// The handoff of a task whose clone is over a 256 KiB budget ends with the refusal as a
/// warning (the agent's outcome stands) and `fetch --task` fails with `permission_required`
/// / `fetch_over_budget`, naming the size and the setting; the user's refs, `HEAD`, index and
/// config are as before and no task ref exists. With the budget raised to the size it names,
/// `fetch` brings the commit back.
#[test]
fn a_task_over_the_fetch_back_budget_is_refused_and_fetched_once_it_is_raised() {
    if !engine_ready("clone_task_budget", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("big", BIG_COMMIT)]);
    let config = std::fs::read_to_string(host.config_file()).unwrap();
    std::fs::write(
        host.config_file(),
        format!("[handoff]\nfetch_back_max_bytes = 262144\n\n{config}"),
    )
    .unwrap();
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-budget-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let before = snapshot(&repo);
    let refs_before = user_refs(&repo);

    let r = ok(&host.handoff(&repo, "big", &["--task", "big"]));
    let warnings = r["result"]["warnings"].to_string();
    assert!(warnings.contains("fetch_back_max_bytes"), "{r:#}");
    assert!(r["result"]["task"]["fetched"].is_null(), "{r:#}");
    let fetch = || {
        host.run(&[
            "fetch",
            "--task",
            "big",
            "--workspace-folder",
            repo.to_str().unwrap(),
            "--format",
            "json",
        ])
    };
    let refused = fetch();
    assert_eq!(refused.status.code(), Some(12));
    let v = super::envelope(&refused);
    let error = &v["error"];
    assert_eq!(error["code"], "permission_required", "{v:#}");
    let details = &error["details"];
    assert_eq!(details["reason"], "fetch_over_budget", "{v:#}");
    assert_eq!(details["budget"], 262144);
    assert_eq!(details["setting"], "handoff.fetch_back_max_bytes");
    let size = details["size"].as_u64().expect("size");
    assert!(size > 512 * 1024, "{size}");
    assert!(error["message"].to_string().contains(&size.to_string()));
    assert_eq!(snapshot(&repo), before);
    assert_eq!(user_refs(&repo), refs_before, "no ref written");
    assert!(git(&repo, &["for-each-ref", "refs/devcell/"]).is_empty());

    let config = std::fs::read_to_string(host.config_file()).unwrap();
    std::fs::write(
        host.config_file(),
        config.replace("262144", &size.to_string()),
    )
    .unwrap();
    let v = ok(&fetch());
    let tip = v["result"]["fetched"].as_str().expect("fetched");
    let clone = host.clone_of("big");
    assert_eq!(git(&clone, &["rev-parse", "devcell/big"]), tip);
    assert_eq!(git(&repo, &["rev-parse", "refs/devcell/tasks/big"]), tip);
    assert_eq!(snapshot(&repo), before);
    target.assert_untouched();
}

/// The agent commits 8 MiB of zeros: a loose object of a few KB on disk.
const ZEROS_COMMIT: &str = "set -e; head -c 8388608 /dev/zero > zeros; git add zeros; \
     git -c user.name=agent -c user.email=agent@devcell.invalid -c commit.gpgsign=false \
     commit -q -m zeros";

/// Attack H3 (spec-note 0438): the copy budget counts compressed bytes, so the bound on what
/// the host inflates is its own. An agent's commit of 8 MiB of zeros (a few KB on disk, far
/// inside `fetch_back_max_bytes`) over a 1 MiB `fetch_back_max_object_bytes` is not fetched:
/// the handoff warns naming the setting, `fetch --task` fails with `permission_required` /
/// `fetch_inflated_over_budget` naming the object's size, and the user's repository is as it
/// was; with the bound raised, `fetch` brings the commit back.
#[test]
fn a_task_whose_object_inflates_past_the_budget_is_refused() {
    if !engine_ready("clone_task_inflated", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("zeros", ZEROS_COMMIT)]);
    let config = std::fs::read_to_string(host.config_file()).unwrap();
    std::fs::write(
        host.config_file(),
        format!("[handoff]\nfetch_back_max_object_bytes = 1048576\n\n{config}"),
    )
    .unwrap();
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-inflated-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let before = snapshot(&repo);
    let refs_before = user_refs(&repo);

    let r = ok(&host.handoff(&repo, "zeros", &["--task", "zeros"]));
    let warnings = r["result"]["warnings"].to_string();
    assert!(warnings.contains("fetch_back_max_object_bytes"), "{r:#}");
    assert!(r["result"]["task"]["fetched"].is_null(), "{r:#}");
    // `status` says why the branch is not fetched
    let status = ok(&host.run(&[
        "status",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let refused = status["result"]["tasks"][0]["refused"].to_string();
    assert!(
        refused.contains("fetch_back_max_object_bytes"),
        "{status:#}"
    );
    let fetch = || {
        host.run(&[
            "fetch",
            "--task",
            "zeros",
            "--workspace-folder",
            repo.to_str().unwrap(),
            "--format",
            "json",
        ])
    };
    let refused = fetch();
    assert_eq!(refused.status.code(), Some(12));
    let v = super::envelope(&refused);
    let details = &v["error"]["details"];
    assert_eq!(details["reason"], "fetch_inflated_over_budget", "{v:#}");
    assert_eq!(details["setting"], "handoff.fetch_back_max_object_bytes");
    assert_eq!(details["size"], 8_388_608);
    assert_eq!(snapshot(&repo), before);
    assert_eq!(user_refs(&repo), refs_before, "no ref written");
    assert!(git(&repo, &["for-each-ref", "refs/devcell/"]).is_empty());

    let config = std::fs::read_to_string(host.config_file()).unwrap();
    std::fs::write(host.config_file(), config.replace("1048576", "8388608")).unwrap();
    let v = ok(&fetch());
    let tip = v["result"]["fetched"].as_str().expect("fetched");
    assert_eq!(git(&repo, &["rev-parse", "refs/devcell/tasks/zeros"]), tip);
    assert_eq!(snapshot(&repo), before);
    target.assert_untouched();
}
