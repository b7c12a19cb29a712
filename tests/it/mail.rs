//! The door (issue 30, spec-note 0531): three parallel clone tasks of one repository talk
//! through `devcell-mail` in their sandboxes and devcell's mediator on the host. A sends a
//! `contract-change` to B and C, B requests something of C, C replies; a `handoff` from A is
//! held by policy until the host user forwards it with `devcell mail forward`. Spoofing the
//! sender fails, and no sandbox sees the log, the mediator's state or another task's socket.

use crate::support::deadline::Bounded as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::clone_tasks::{Host, containers_of, mount_sources, ok, source_repo};
use crate::support;
use crate::support::docker::engine_ready;
use crate::support::hostile::HostTarget;

/// Shell helpers every agent script starts with: `wait_for TYPE FROM` polls the inbox (at
/// most 180 s) for a message of that type from that task and prints its id.
const LIB: &str = r#"
fail() { echo "AGENT FAILED: $*" >&2; exit 9; }
wait_for() {
  n=0
  while [ $n -lt 180 ]; do
    id=$(devcell-mail inbox | grep "from $2  \[$1" | cut -d' ' -f1 | head -n 1)
    [ -n "$id" ] && { echo "$id"; return 0; }
    n=$((n+1)); sleep 1
  done
  fail "no $1 from $2"
}
"#;

/// A: the contract change to B and C (retried until both are registered), the spoofing and
/// looking-around attempts, the held handoff to C; then waits for both acks.
const A: &str = r#"
n=0
until devcell-mail send --to tb,tc --type contract-change --subject "api v2" --ack-required --body "the api changes" > /tmp/cc 2>/tmp/err; do
  n=$((n+1)); [ $n -lt 180 ] || fail "send: $(cat /tmp/err)"; sleep 1
done
grep -q "tb: queued" /tmp/cc || fail "receipt $(cat /tmp/cc)"
devcell-mail send --from tb --to tc --subject spoof --body x 2>/tmp/spoof
[ $? -eq 2 ] || fail "--from accepted"
grep -q -- "--from" /tmp/spoof || fail "no usage error: $(cat /tmp/spoof)"
touch /.devcell-mail/other.sock 2>/dev/null && fail "the socket folder is writable"
ls /.devcell-mail >/dev/null 2>&1 && fail "the socket folder can be listed"
DEVCELL_MAIL_SOCKET=/.devcell-mail/../mail/log.jsonl devcell-mail inbox 2>/dev/null && fail "another socket path answered"
find / -name 'log.jsonl' 2>/dev/null | grep -q . && fail "a mail log is visible"
devcell-mail send --to tc --type handoff --subject "take over the parser" --body "please" > /tmp/h || fail "handoff send"
grep -q "tc: held" /tmp/h || fail "handoff not held: $(cat /tmp/h)"
n=0
until [ "$(devcell-mail sent | grep 'api v2' | grep -c 'acknowledged.*acknowledged')" = 1 ]; do
  n=$((n+1)); [ $n -lt 180 ] || fail "no acks: $(devcell-mail sent)"; sleep 1
done
echo A-DONE
"#;

/// B: reads and acks the contract change, requests of C, waits for C's reply.
const B: &str = r#"
cc=$(wait_for contract-change ta) || exit 9
devcell-mail read "$cc" | grep -q "the api changes" || fail "read $cc"
devcell-mail ack "$cc" || fail "ack $cc"
devcell-mail send --to tc --type request --subject "need the schema" --ack-required --body "send me the schema" || fail "request"
r=$(wait_for reply tc) || exit 9
devcell-mail read "$r" | grep -q "here it is" || fail "read reply"
devcell-mail ack "$r" || fail "ack reply"
echo B-DONE
"#;

/// C: acks the contract change, answers B's request, waits for the forwarded handoff.
const C: &str = r#"
cc=$(wait_for contract-change ta) || exit 9
devcell-mail ack "$cc" || fail "ack $cc"
q=$(wait_for request tb) || exit 9
devcell-mail read "$q" >/dev/null || fail "read request"
devcell-mail reply "$q" --body "here it is" || fail "reply"
devcell-mail ack "$q" || fail "ack request"
h=$(wait_for handoff ta) || exit 9
devcell-mail ack "$h" || fail "ack handoff"
echo C-DONE
"#;

fn mail_list(host: &Host, repo: &Path) -> Value {
    let out = host.run(&[
        "mail",
        "list",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "mail list: {e}: {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The messages of a `mail list` envelope (its `result`, or the whole value).
fn messages(list: &Value) -> Vec<Value> {
    let r = if list.get("result").is_some() {
        &list["result"]
    } else {
        list
    };
    let items = r.get("messages").unwrap_or(r);
    items.as_array().cloned().unwrap_or_default()
}

#[test]
fn three_clone_tasks_talk_through_the_mediator_only() {
    if !engine_ready("mail_three_tasks", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let script = |body: &str| format!("{LIB}\n{body}");
    let (a, b, c) = (script(A), script(B), script(C));
    let host = Host::new(&[("a", &a), ("b", &b), ("c", &c)]);
    let mut config = std::fs::read_to_string(host.config_file()).unwrap();
    config.push_str("[mail]\n[[mail.rules]]\ntype = \"handoff\"\naction = \"hold\"\n");
    std::fs::write(host.config_file(), config).unwrap();
    let at = tempfile::Builder::new()
        .prefix("devcell-mail-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);

    // the three handoffs in parallel; the host user forwards the held handoff meanwhile
    let (results, forwarded) = std::thread::scope(|s| {
        let handles: Vec<_> = [("a", "ta"), ("b", "tb"), ("c", "tc")]
            .into_iter()
            .map(|(agent, task)| {
                let (host, repo) = (&host, &repo);
                s.spawn(move || host.handoff(repo, agent, &["--task", task]))
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut forwarded = None;
        while forwarded.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
            let held = messages(&mail_list(&host, &repo)).into_iter().find(|m| {
                m["message"]["type"] == "handoff" && m["recipients"]["tc"]["state"] == "held"
            });
            if let Some(m) = held {
                let id = m["message"]["id"].as_str().unwrap().to_string();
                let out = host.run(&[
                    "mail",
                    "forward",
                    &id,
                    "--workspace-folder",
                    repo.to_str().unwrap(),
                ]);
                assert!(
                    out.status.success(),
                    "forward: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                forwarded = Some(id);
            }
        }
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (results, forwarded)
    });
    for (out, who) in results.iter().zip(["ta", "tb", "tc"]) {
        let v = ok(out);
        assert_eq!(v["result"]["task"]["task"], who, "{v:#}");
    }
    let forwarded = forwarded.expect("the handoff was held for the host user");

    // the log has every message, from its true sender, in the state policy and acks left it
    let list = messages(&mail_list(&host, &repo));
    let find = |kind: &str| {
        list.iter()
            .find(|m| m["message"]["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {list:#?}"))
            .clone()
    };
    let cc = find("contract-change");
    assert_eq!(cc["message"]["from"], "ta");
    assert_eq!(cc["recipients"]["tb"]["state"], "acknowledged");
    assert_eq!(cc["recipients"]["tc"]["state"], "acknowledged");
    let request = find("request");
    assert_eq!(request["message"]["from"], "tb");
    assert_eq!(request["message"]["to"], serde_json::json!(["tc"]));
    assert_eq!(request["recipients"]["tc"]["state"], "acknowledged");
    let reply = find("reply");
    assert_eq!(reply["message"]["from"], "tc");
    assert_eq!(reply["message"]["replyTo"], request["message"]["id"]);
    assert_eq!(reply["recipients"]["tb"]["state"], "acknowledged");
    let handoff = find("handoff");
    assert_eq!(handoff["message"]["id"], forwarded.as_str());
    assert_eq!(handoff["message"]["from"], "ta");
    assert_eq!(handoff["recipients"]["tc"]["state"], "acknowledged");
    assert_eq!(
        list.len(),
        4,
        "nothing else was accepted (the spoof was refused): {list:#?}"
    );

    // each task's container bound only its own socket folder and the client, read-only; the
    // mediator's folder (`state/mail`) was bound into none
    let mail_state = host.state().join("mail");
    let mut folders = Vec::new();
    for task in ["ta", "tb", "tc"] {
        let clone = host.clone_of(task);
        for id in containers_of(&clone) {
            let sources = mount_sources(&id);
            assert!(
                sources
                    .iter()
                    .all(|s| !Path::new(s).starts_with(&mail_state)),
                "{task}: {sources:?}"
            );
            let door: Vec<_> = sources
                .iter()
                .filter(|s| Path::new(s).starts_with(host.state().join("door")))
                .cloned()
                .collect();
            assert_eq!(door.len(), 2, "{task}: {sources:?}");
            folders.extend(door.into_iter().filter(|s| s.ends_with("/socket")));
        }
    }
    folders.sort();
    folders.dedup();
    assert_eq!(folders.len(), 3, "one socket folder per task: {folders:?}");
    // every session ended: its socket is gone
    for f in &folders {
        assert!(!Path::new(f).join("mail.sock").exists(), "{f}");
    }

    // issue 30 item 5 (spec-note 0534): the group's log outlives `delete --task` of one task
    // and `delete` of the whole workspace, which names it as kept
    let logs = |host: &Host| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(host.state().join("mail"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|g| g.path().join("log.jsonl"))
            .filter(|l| l.is_file())
            .collect()
    };
    let log = logs(&host);
    assert_eq!(log.len(), 1, "{log:?}");
    let before = std::fs::read(&log[0]).unwrap();
    let folder = repo.to_str().unwrap();
    ok(&host.run(&[
        "delete",
        "--workspace-folder",
        folder,
        "--task",
        "ta",
        "--format",
        "json",
    ]));
    assert!(
        std::fs::read(&log[0]).unwrap().starts_with(&before),
        "the log survives delete --task"
    );
    assert_eq!(
        messages(&mail_list(&host, &repo)).len(),
        4,
        "every message listed"
    );
    let d = ok(&host.run(&["delete", "--workspace-folder", folder, "--format", "json"]));
    assert_eq!(
        d["result"]["kept"]["mailLog"],
        log[0].to_str().unwrap(),
        "{d:#}"
    );
    assert!(
        std::fs::read(&log[0]).unwrap().starts_with(&before),
        "the log survives delete of the workspace"
    );
    assert_eq!(messages(&mail_list(&host, &repo)).len(), 4, "still listed");
    target.assert_untouched();
}

/// Worktree handoff `wa` (the repository): its request to `wb` (retried until `wb` is
/// registered), then garbage on its own socket (more arguments than the channel takes, an
/// argument that is not UTF-8: each refused with status 2), then it waits for `wb`'s reply.
const WA: &str = r#"
n=0
until devcell-mail send --to wb --type request --subject "need the schema" --ack-required --body "send it" > /tmp/r 2>/tmp/err; do
  n=$((n+1)); [ $n -lt 180 ] || fail "send: $(cat /tmp/err)"; sleep 1
done
devcell-mail $(seq 1 300) >/dev/null 2>/tmp/g1
[ $? -eq 2 ] || fail "300 arguments were taken: $(cat /tmp/g1)"
devcell-mail inbox "$(printf 'x\377')" >/dev/null 2>/tmp/g2
[ $? -eq 2 ] || fail "an argument not UTF-8 was taken: $(cat /tmp/g2)"
find / -name 'log.jsonl' 2>/dev/null | grep -q . && fail "a mail log is visible"
ls /.devcell-mail >/dev/null 2>&1 && fail "the socket folder can be listed"
grep -q '"task": "wa"' .devcell/context.json || fail "the context file does not name the channel"
r=$(wait_for reply wb) || exit 9
devcell-mail read "$r" | grep -q "here it is" || fail "read reply"
devcell-mail ack "$r" || fail "ack reply"
echo WA-DONE
"#;

/// Worktree handoff `wb` (the linked worktree): answers `wa`'s request after `wa`'s garbage
/// (the mediator still talks), and waits until `wa` has acknowledged the reply.
const WB: &str = r#"
q=$(wait_for request wa) || exit 9
devcell-mail read "$q" | grep -q "send it" || fail "read request"
devcell-mail reply "$q" --body "here it is" > /tmp/reply || fail "reply"
devcell-mail ack "$q" || fail "ack request"
n=0
until devcell-mail sent | grep -q 'wa: acknowledged'; do
  n=$((n+1)); [ $n -lt 180 ] || fail "no ack: $(devcell-mail sent)"; sleep 1
done
echo WB-DONE
"#;

/// Item 1 and 3 of issue 30's second round (spec-note 0532): two worktree handoffs of one
/// repository (`--mail`) exchange a request and its reply through the mediator only; one
/// writes garbage to its socket first, which is refused, counted and logged with its task while
/// the other still talks; each session's record names its channel with its counts.
#[test]
fn two_worktree_handoffs_talk_through_the_mediator_and_survive_garbage() {
    if !engine_ready("mail_worktrees", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let script = |body: &str| format!("{LIB}\n{body}");
    let (wa, wb) = (script(WA), script(WB));
    let host = Host::new(&[("wa", &wa), ("wb", &wb)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-mail-wt-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let wt = at.path().join("wt");
    let handoff = |folder: &Path, agent: &str| {
        host.run(&[
            "handoff",
            "--isolation",
            "worktree",
            "--mail",
            "--task",
            agent,
            "--workspace-folder",
            folder.to_str().unwrap(),
            "--agent",
            agent,
            "--format",
            "json",
        ])
    };
    let results = std::thread::scope(|s| {
        let a = s.spawn(|| handoff(&repo, "wa"));
        let b = s.spawn(|| handoff(&wt, "wb"));
        [a.join().unwrap(), b.join().unwrap()]
    });
    let cleanup = || {
        for folder in [&repo, &wt] {
            for id in containers_of(folder) {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", "-v", &id])
                    .bounded_output();
            }
        }
    };
    let envelopes: Vec<Value> = results.iter().map(crate::clone_tasks::envelope).collect();
    for (out, who) in results.iter().zip(["wa", "wb"]) {
        if out.status.code() != Some(0) {
            cleanup();
        }
        let v = ok(out);
        let mail = &v["result"]["session"]["mail"];
        assert_eq!(mail["task"], who, "{v:#}");
        assert_eq!(mail["socket"], "/.devcell-mail/mail.sock", "{v:#}");
        assert_eq!(mail["command"], "/usr/bin/devcell-mail", "{v:#}");
    }
    let (a, b) = (
        &envelopes[0]["result"]["session"]["mail"],
        &envelopes[1]["result"]["session"]["mail"],
    );
    assert_eq!(
        a["group"], b["group"],
        "one mediator for the repository's worktrees"
    );
    assert_eq!(
        (&a["posted"], &b["posted"]),
        (&1.into(), &1.into()),
        "{a:#} {b:#}"
    );
    assert_eq!(a["delivered"], 1, "{a:#}");
    assert_eq!(a["malformed"], 2, "{a:#}");
    assert_eq!(b["malformed"], 0, "{b:#}");

    // the log: the request and the reply from their true senders, both acknowledged; the
    // garbage as two refusals of `wa`, nothing of it accepted
    let list = messages(&mail_list(&host, &repo));
    assert_eq!(list.len(), 2, "{list:#?}");
    let request = list
        .iter()
        .find(|m| m["message"]["type"] == "request")
        .unwrap();
    assert_eq!(request["message"]["from"], "wa");
    assert_eq!(request["recipients"]["wb"]["state"], "acknowledged");
    let reply = list
        .iter()
        .find(|m| m["message"]["type"] == "reply")
        .unwrap();
    assert_eq!(reply["message"]["from"], "wb");
    assert_eq!(reply["recipients"]["wa"]["state"], "acknowledged");
    let group = a["group"].as_str().unwrap();
    let log =
        std::fs::read_to_string(host.state().join("mail").join(group).join("log.jsonl")).unwrap();
    let malformed: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "refused" && v["code"] == "mail.malformed_connection")
        .collect();
    assert_eq!(malformed.len(), 2, "{log}");
    assert!(malformed.iter().all(|v| v["from"] == "wa"), "{log}");

    // each container bound the client and its own socket folder, never the mediator's folder
    let mail_state = host.state().join("mail");
    for folder in [&repo, &wt] {
        for id in containers_of(folder) {
            let sources = mount_sources(&id);
            assert!(
                sources
                    .iter()
                    .all(|s| !Path::new(s).starts_with(&mail_state)),
                "{sources:?}"
            );
            let door = sources
                .iter()
                .filter(|s| Path::new(s).starts_with(host.state().join("door")))
                .count();
            assert_eq!(door, 2, "{sources:?}");
        }
    }
    // `audit` names the channel of each container, with its session's record
    let audit = ok(&host.run(&[
        "audit",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let mail = &audit["result"]["mail"];
    assert_eq!(mail["socket"], "/.devcell-mail/mail.sock", "{audit:#}");
    assert_eq!(mail["readOnly"], true, "{audit:#}");
    assert_eq!(mail["session"]["task"], "wa", "{audit:#}");
    assert_eq!(mail["session"]["malformed"], 2, "{audit:#}");
    for m in [a, b] {
        let socket = m["hostSocket"].as_str().unwrap();
        assert!(
            !Path::new(socket).exists(),
            "the socket is removed: {socket}"
        );
    }
    cleanup();
    target.assert_untouched();
}

/// The agent of [`a_container_restarted_mid_lease_gets_the_message_again`]: the first time it
/// reads the host's message (taking its lease), records its id in the workspace and waits to
/// be killed by the restart; the next time, in the restarted container, it waits for the
/// message to come back once the lease ran out, acknowledges it and checks it is gone.
const RESTARTED: &str = r#"
if [ ! -f .mail-read-once ]; then
  m=$(wait_for request @mediator) || exit 9
  devcell-mail read "$m" | grep -q "restart me" || fail "read $m"
  devcell-mail inbox | grep -q "^$m" && fail "a read message under its lease is still in the inbox"
  echo "$m" > .mail-read-once
  sleep 100000
fi
m=$(cat .mail-read-once)
n=0
until devcell-mail inbox | grep -q "^$m"; do
  n=$((n+1)); [ $n -lt 120 ] || fail "not redelivered: $(devcell-mail inbox)"; sleep 1
done
devcell-mail ack "$m" || fail "ack $m"
devcell-mail inbox | grep -q "^$m" && fail "still in the inbox after its ack"
echo RESTARTED-DONE
"#;

/// Issue 30, "Faults": a container restarted mid-lease (spec-note 0535 proved it with the
/// channel's process killed; this is the real engine). A worktree handoff's agent reads a
/// message the host posted with `--ack-required` (its lease, 3 s here, starts) and the
/// container is restarted (`docker restart`) before it acknowledges: the agent dies with it.
/// The next handoff of the task reuses the restarted container, and its agent finds the
/// message in the inbox again once the lease ran out, acknowledges it, and it is gone; the
/// log records the redelivery (`by: "@lease"`) and the acknowledgement.
#[test]
fn a_container_restarted_mid_lease_gets_the_message_again() {
    if !engine_ready("mail_restart", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let script = format!("{LIB}\n{RESTARTED}");
    let host = Host::new(&[("wa", &script)]);
    let mut config = std::fs::read_to_string(host.config_file()).unwrap();
    config.push_str("[mail]\nlease_seconds = 3\n");
    std::fs::write(host.config_file(), config).unwrap();
    let at = tempfile::Builder::new()
        .prefix("devcell-mail-restart-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let folder = repo.to_str().unwrap();
    let handoff = || {
        host.run(&[
            "handoff",
            "--isolation",
            "worktree",
            "--mail",
            "--task",
            "wa",
            "--workspace-folder",
            folder,
            "--agent",
            "wa",
            "--format",
            "json",
        ])
    };
    let cleanup = || {
        for id in containers_of(&repo) {
            let _ = std::process::Command::new("docker")
                .args(["rm", "-f", "-v", &id])
                .bounded_output();
        }
    };
    let marker = repo.join(".mail-read-once");
    let mut restarted = Vec::new();
    let first = std::thread::scope(|s| {
        let first = s.spawn(handoff);
        // the task is known to the mediator once its session runs: post until it is
        let deadline = Instant::now() + Duration::from_secs(240);
        let posted = loop {
            let out = host.run(&[
                "mail",
                "post",
                "--workspace-folder",
                folder,
                "--to",
                "wa",
                "--type",
                "request",
                "--ack-required",
                "--subject",
                "restart me",
                "--body",
                "then acknowledge",
                "--format",
                "json",
            ]);
            if out.status.success() || first.is_finished() || Instant::now() > deadline {
                break out;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        assert!(
            posted.status.success(),
            "{}",
            String::from_utf8_lossy(&posted.stderr)
        );
        while !marker.exists() && !first.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(marker.exists(), "the agent never read the message");
        restarted = containers_of(&repo);
        assert_eq!(restarted.len(), 1, "{restarted:?}");
        for id in &restarted {
            let out = std::process::Command::new("docker")
                .args(["restart", "-t", "1", id])
                .bounded_output()
                .expect("docker runs");
            assert!(out.status.success(), "{out:?}");
        }
        first.join().unwrap()
    });
    assert_ne!(
        first.status.code(),
        Some(0),
        "the first agent was killed by the restart"
    );
    let second = handoff();
    if second.status.code() != Some(0) {
        cleanup();
    }
    let v = ok(&second);
    assert_eq!(v["result"]["exitCode"], 0, "{v:#}");
    assert_eq!(
        containers_of(&repo),
        restarted,
        "the restarted container was reused"
    );
    let list = messages(&mail_list(&host, &repo));
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!(
        list[0]["recipients"]["wa"]["state"], "acknowledged",
        "{list:#?}"
    );
    let group = v["result"]["session"]["mail"]["group"].as_str().unwrap();
    let log =
        std::fs::read_to_string(host.state().join("mail").join(group).join("log.jsonl")).unwrap();
    assert!(
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|e| e["by"] == "@lease"),
        "no redelivery in the log: {log}"
    );
    cleanup();
    target.assert_untouched();
}
