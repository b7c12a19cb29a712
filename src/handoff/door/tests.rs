//! The door's framing, server and the real `devcell-mail` run on the host (it is static).

use super::frame::{self, FrameError, op};
use super::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// The mediator of the group `group` under `settings`' policy and bounds, with `tasks`
/// registered.
fn mediator(
    state: &std::path::Path,
    group: &str,
    settings: &crate::settings::MailSettings,
    tasks: &[&str],
) -> crate::mail::Mediator {
    use crate::mail::{Bounds, GroupName, Mediator, Policy, TaskName};
    let m = Mediator::open(
        state,
        &GroupName::new(group).unwrap(),
        Policy::from_settings(settings).unwrap(),
        Bounds::from_settings(settings),
    )
    .unwrap();
    for task in tasks {
        m.register(&TaskName::new(task).unwrap(), None).unwrap();
    }
    m
}

/// Echoes what it got: the sender and argv on stdout; `cat` reads stdin (at most 8 bytes);
/// `fail` answers status 3 on stderr. Records refusals.
#[derive(Default)]
struct Echo {
    refused: Mutex<Vec<String>>,
}

impl DoorHandler for Echo {
    fn handle(&self, sender: &str, argv: &[String], input: &mut dyn Input) -> Answer {
        match argv.first().map(String::as_str) {
            Some("cat") => match input.read(8) {
                Ok(data) => Answer::ok([b"in:".as_slice(), &data].concat()),
                Err(e) => Answer::fail(1, format!("{e}\n")),
            },
            Some("fail") => Answer::fail(3, "failed\n"),
            _ => Answer::ok(format!("{sender}:{}\n", argv.join("|"))),
        }
    }

    fn refused(&self, _sender: &str, why: &str) {
        self.refused.lock().unwrap().push(why.to_string());
    }
}

fn frame_bytes(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_frame(&mut v, kind, payload).unwrap();
    v
}

#[test]
fn frames_round_trip_and_bad_frames_are_refused() {
    let bytes = [frame_bytes(op::ARG, b"send"), frame_bytes(op::GO, b"")].concat();
    let mut r = bytes.as_slice();
    assert_eq!(
        frame::read_frame(&mut r, op::FROM_CLIENT, 16).unwrap(),
        Some((op::ARG, b"send".to_vec()))
    );
    assert_eq!(
        frame::read_frame(&mut r, op::FROM_CLIENT, 16).unwrap(),
        Some((op::GO, Vec::new()))
    );
    assert_eq!(
        frame::read_frame(&mut r, op::FROM_CLIENT, 16).unwrap(),
        None
    );

    // oversize: refused from the header, before any payload is read
    let big = frame_bytes(op::ARG, &[b'x'; 17]);
    let mut r = big.as_slice();
    let e = frame::read_frame(&mut r, op::FROM_CLIENT, 16).unwrap_err();
    assert!(
        matches!(e, FrameError::TooLarge { len: 17, max: 16 }),
        "{e:?}"
    );
    assert_eq!(r.len(), 17, "nothing of the payload was read");
    // a frame announcing 4 GiB
    let huge = [op::ARG, 0xff, 0xff, 0xff, 0xff];
    let e = frame::read_frame(&mut huge.as_slice(), op::FROM_CLIENT, 1 << 20).unwrap_err();
    assert!(matches!(e, FrameError::TooLarge { .. }), "{e:?}");

    // truncated inside the header, then inside the payload
    let e = frame::read_frame(&mut [op::ARG, 0, 0].as_slice(), op::FROM_CLIENT, 16);
    assert!(matches!(e, Err(FrameError::Truncated)), "{e:?}");
    let cut = &frame_bytes(op::ARG, b"abcdef")[..8];
    let e = frame::read_frame(&mut &cut[..], op::FROM_CLIENT, 16);
    assert!(matches!(e, Err(FrameError::Truncated)), "{e:?}");

    // unknown op, and an op of the other direction
    for kind in [b'Q', op::EXIT] {
        let bytes = frame_bytes(kind, b"");
        let e = frame::read_frame(&mut bytes.as_slice(), op::FROM_CLIENT, 16);
        assert!(
            matches!(e, Err(FrameError::UnknownOp(k)) if k == kind),
            "{e:?}"
        );
    }

    let e = frame::read_magic(&mut b"GET / HTTP/1.1".as_slice()).unwrap_err();
    assert!(matches!(e, FrameError::BadMagic), "{e:?}");
    frame::read_magic(&mut frame::MAGIC.as_slice()).unwrap();
}

/// Runs `client` bytes against [`server::serve`] on a socket pair; what the server wrote back.
fn serve_bytes(client: Vec<u8>, limits: Limits, handler: &Echo) -> (Vec<u8>, Result<(), String>) {
    let (mut near, mut far) = UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = near.write_all(&client);
        let _ = near.shutdown(std::net::Shutdown::Write);
        let mut back = Vec::new();
        let _ = near.read_to_end(&mut back);
        back
    });
    let served = server::serve(&mut far, "a", handler, &limits).map_err(|e| e.to_string());
    drop(far);
    (writer.join().unwrap(), served)
}

/// The host's answer frames as (stdout, stderr, status).
fn answer_of(bytes: &[u8]) -> (String, String, Option<u8>) {
    let (mut out, mut err, mut status) = (String::new(), String::new(), None);
    let mut r = bytes;
    while let Some((kind, payload)) = frame::read_frame(&mut r, op::FROM_HOST, 1 << 20).unwrap() {
        let text = String::from_utf8_lossy(&payload).into_owned();
        match kind {
            op::STDOUT => out.push_str(&text),
            op::STDERR => err.push_str(&text),
            op::EXIT => status = payload.first().copied(),
            _ => {}
        }
    }
    (out, err, status)
}

#[test]
fn the_server_answers_a_command_and_refuses_malformed_connections() {
    let echo = Echo::default();
    let limits = Limits {
        max_args: 3,
        max_argv_bytes: 16,
        ..Limits::default()
    };
    let hello = |args: &[&[u8]]| {
        let mut v = frame::MAGIC.to_vec();
        for a in args {
            v.extend(frame_bytes(op::ARG, a));
        }
        v
    };
    let ok = [hello(&[b"inbox", b"--format"]), frame_bytes(op::GO, b"")].concat();
    let (back, served) = serve_bytes(ok, limits, &echo);
    served.unwrap();
    assert_eq!(
        answer_of(&back),
        ("a:inbox|--format\n".into(), String::new(), Some(0))
    );

    // unknown op after the argv began
    let bad = [hello(&[b"inbox"]), frame_bytes(b'Q', b"")].concat();
    let (back, served) = serve_bytes(bad, limits, &echo);
    assert!(served.unwrap_err().contains("unknown frame kind"));
    let (_, err, status) = answer_of(&back);
    assert_eq!(status, Some(2));
    assert!(err.contains("unknown frame kind 0x51"), "{err}");

    // standard input before the host asked for it is an unknown op too
    let early = [hello(&[b"cat"]), frame_bytes(op::STDIN, b"x")].concat();
    assert_eq!(answer_of(&serve_bytes(early, limits, &echo).0).2, Some(2));

    // the argv over its byte bound, over its count bound
    let long = [
        hello(&[b"0123456789", b"0123456789"]),
        frame_bytes(op::GO, b""),
    ]
    .concat();
    let (back, _) = serve_bytes(long, limits, &echo);
    let (_, err, status) = answer_of(&back);
    assert_eq!(status, Some(2));
    assert!(err.contains("exceeds the limit"), "{err}");
    let many = [hello(&[b"a", b"b", b"c", b"d"]), frame_bytes(op::GO, b"")].concat();
    assert_eq!(answer_of(&serve_bytes(many, limits, &echo).0).2, Some(2));

    // truncated: the client stops inside a frame, and before `GO`
    let mut cut = hello(&[b"send"]);
    cut.truncate(cut.len() - 2);
    let (_, served) = serve_bytes(cut, limits, &echo);
    assert!(served.unwrap_err().contains("cut short"));
    let (_, served) = serve_bytes(hello(&[b"send"]), limits, &echo);
    assert!(served.unwrap_err().contains("cut short"));

    // not our protocol at all: closed without an answer
    let (back, served) = serve_bytes(b"GET / HTTP/1.1\r\n\r\n".to_vec(), limits, &echo);
    assert!(served.is_err());
    assert!(back.is_empty());

    let refused = echo.refused.lock().unwrap();
    assert_eq!(refused.len(), 7, "{refused:?}");
}

/// The real `devcell-mail` (static, run on the host) against a [`DoorServer`]: its argv reach
/// the handler with the sender stamped from the socket, its stdin only when asked for and
/// bounded, and it writes the answer and exits with its status. Without a socket: exit 2.
#[test]
fn devcell_mail_is_a_dumb_pipe_to_the_server() {
    let state = tempfile::tempdir().unwrap();
    let client = install_client(state.path()).unwrap();
    let folder = SocketFolder::create(state.path(), "g", "task-a").unwrap();
    let server = DoorServer::start(
        &folder,
        "task-a",
        Arc::new(Echo::default()),
        Limits::default(),
    )
    .unwrap();
    let mode = std::fs::metadata(server.socket()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o666
    );
    let run = |args: &[&str], stdin: &[u8]| {
        let mut child = std::process::Command::new(&client)
            .args(args)
            .env("DEVCELL_MAIL_SOCKET", folder.socket())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let data = stdin.to_vec();
        let feeder = std::thread::spawn(move || {
            let _ = input.write_all(&data);
        });
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code(),
        )
    };
    // `--from` is only an argument: the sender is the socket's task
    let (out, _, code) = run(&["send", "--from", "task-b", "--body", "a b\n"], b"");
    assert_eq!(out, "task-a:send|--from|task-b|--body|a b\n\n");
    assert_eq!(code, Some(0));
    assert_eq!(
        run(&["cat"], b"12345678"),
        ("in:12345678".into(), String::new(), Some(0))
    );
    let (_, err, code) = run(&["cat"], b"123456789");
    assert_eq!(code, Some(1));
    assert!(err.contains("longer than 8 bytes"), "{err}");
    assert_eq!(
        run(&["fail"], b""),
        (String::new(), "failed\n".into(), Some(3))
    );

    server.stop();
    assert!(
        !folder.socket().exists(),
        "the socket is removed with its server"
    );
    let (out, err, code) = run(&["inbox"], b"");
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(err.contains("no mail channel at"), "{err}");
}

/// Standard input for [`MailDoor`] tests.
struct Given(Option<Vec<u8>>);

impl Input for Given {
    fn read(&mut self, max: usize) -> Result<Vec<u8>, InputError> {
        let data = self.0.take().unwrap_or_default();
        if data.len() > max {
            return Err(InputError::TooLarge { max });
        }
        Ok(data)
    }
}

/// The commands through a real mediator: the sender is the socket's task whatever the argv
/// says (`--from` is no option), a body comes from `--body` or stdin (bounded), a held type
/// stays out of the inbox, usage errors are status 2 and the mediator's refusals status 1 with
/// their code and hint.
#[test]
fn mail_commands_answer_through_the_mediator_as_the_sockets_task() {
    use crate::settings::{MailAction, MailRule, MailSettings};
    let state = tempfile::tempdir().unwrap();
    let settings = MailSettings {
        rules: vec![MailRule {
            from: "*".into(),
            to: "*".into(),
            kind: "handoff".into(),
            action: MailAction::Hold,
        }],
        max_message_bytes: 256,
        ..MailSettings::default()
    };
    let m = mediator(state.path(), "g", &settings, &["a", "b"]);
    let door = MailDoor::new(Arc::new(m), 256);
    let call = |who: &str, args: &[&str], stdin: Option<&[u8]>| {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let a = door.handle(who, &argv, &mut Given(stdin.map(<[u8]>::to_vec)));
        (
            String::from_utf8_lossy(&a.stdout).into_owned(),
            String::from_utf8_lossy(&a.stderr).into_owned(),
            a.status,
        )
    };

    let (out, err, code) = call(
        "a",
        &["send", "--from", "b", "--to", "b", "--subject", "x"],
        None,
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--from"), "{err}");

    let (out, _, code) = call(
        "a",
        &[
            "send",
            "--to",
            "b",
            "--subject",
            "api changed",
            "--type",
            "contract-change",
        ],
        Some(b"the body \x1b]52;c;eA==\x07from stdin"),
    );
    assert_eq!(code, 0, "{out}");
    let id = out.lines().next().unwrap().to_string();
    assert!(out.contains("b: queued"), "{out}");

    let (out, _, code) = call("b", &["inbox"], None);
    assert_eq!(code, 0);
    assert!(out.contains(&id) && out.contains("from a"), "{out}");
    let (out, _, _) = call("b", &["read", &id], None);
    assert!(
        out.contains("the body \\u{1b}]52;c;eA==\\u{7}from stdin"),
        "terminal-safe: {out}"
    );
    let (out, _, code) = call("b", &["ack", &id], None);
    assert_eq!(
        (out.as_str(), code),
        (format!("{id} acknowledged\n").as_str(), 0)
    );
    let (out, _, code) = call("b", &["reply", &id, "--body", "ok"], None);
    assert_eq!(code, 0, "{out}");
    let reply = out.lines().next().unwrap().to_string();
    let (out, _, _) = call("a", &["inbox", "--format", "json"], None);
    let items: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(items[0]["message"]["id"], reply.as_str());
    assert_eq!(items[0]["message"]["from"], "b");
    assert_eq!(items[0]["message"]["subject"], "Re: api changed");
    assert_eq!(items[0]["message"]["replyTo"], id.as_str());

    // a held type: the sender sees it held, the recipient nothing
    let send_empty = |subject: &str, kind: &str| {
        let args = ["send", "--to", "b", "--subject", subject, "--type", kind];
        call("a", &[&args[..], &["--body", ""]].concat(), None)
    };
    let (out, _, code) = send_empty("h", "handoff");
    assert_eq!(code, 0);
    assert!(out.contains("b: held"), "{out}");
    assert_eq!(call("b", &["inbox"], None).0, "no messages\n");

    // refusals: unknown recipient, unknown type, body over the bound; nothing sent
    let (_, err, code) = call(
        "a",
        &["send", "--to", "zed", "--subject", "s", "--body", "b"],
        None,
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("error[mail.unknown_recipient]") && err.contains("hint: "),
        "{err}"
    );
    let (_, err, code) = send_empty("s", "gossip");
    assert_eq!(code, 1);
    assert!(err.contains("unknown type `gossip`"), "{err}");
    let (_, err, code) = call(
        "a",
        &["send", "--to", "b", "--subject", "s"],
        Some(&[b'x'; 257]),
    );
    assert_eq!(code, 1);
    assert!(err.contains("error[mail.too_large]"), "{err}");
    let (out, _, _) = call("a", &["sent"], None);
    assert_eq!(out.lines().count(), 2, "{out}");

    let (out, err, code) = call("a", &["--help"], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Usage: devcell-mail"), "{out}");
}

/// Sends `argv` (or `raw` bytes instead) over `socket`; the answer as (stdout, stderr, status).
fn call_socket(
    socket: &std::path::Path,
    argv: &[&str],
    raw: Option<&[u8]>,
) -> (String, String, Option<u8>) {
    let mut s = UnixStream::connect(socket).unwrap();
    let bytes = match raw {
        Some(raw) => raw.to_vec(),
        None => {
            let mut b = frame::MAGIC.to_vec();
            for a in argv {
                b.extend(frame_bytes(op::ARG, a.as_bytes()));
            }
            b.extend(frame_bytes(op::GO, b""));
            b
        }
    };
    let _ = s.write_all(&bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    answer_of(&back)
}

/// The `refused` lines of the group's log with the malformed-connection code.
fn malformed_lines(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "refused" && v["code"] == crate::mail::MALFORMED_CONNECTION)
        .collect()
}

/// A session's channel (spec-note 0532): one open channel per task (a second handoff of the
/// task is refused, never takes the socket over); what goes through is counted: posted,
/// delivered (distinct messages), refused by the mediator, malformed connections (logged with
/// the task, closed, and the server goes on); closing removes the socket, ends the task and
/// lets the next session open it.
#[test]
fn a_sessions_channel_is_one_per_task_counts_what_went_through_and_closes() {
    use crate::mail::{Draft, GroupName, MessageType, TaskName};
    use crate::settings::MailSettings;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path();
    let settings = MailSettings::default();
    let group = GroupName::new("g").unwrap();
    let t = |n: &str| TaskName::new(n).unwrap();
    let request =
        DoorRequest::prepare(state, group.clone(), t("a"), Some("devcell/a".into())).unwrap();
    assert_eq!(request.record().socket, "/.devcell-mail/mail.sock");
    let door = request.open(&settings, std::time::Duration::ZERO).unwrap();
    let busy = request
        .open(&settings, std::time::Duration::from_millis(300))
        .unwrap_err();
    assert!(
        matches!(busy, DoorError::Busy { ref task } if task == "a"),
        "{busy}"
    );
    let socket = door.record().host_socket;
    assert!(
        socket.exists(),
        "the second open left the first one's socket alone"
    );

    let other = mediator(state, group.as_str(), &settings, &["b"]);
    let id = other
        .send(
            &t("b"),
            Draft::new(vec![t("a")], MessageType::Notice, "s", "x"),
        )
        .unwrap()
        .id;

    let (out, _, status) = call_socket(&socket, &["inbox"], None);
    assert_eq!(status, Some(0));
    assert!(out.contains(id.as_str()), "{out}");
    let (_, _, status) = call_socket(&socket, &["read", id.as_str()], None);
    assert_eq!(status, Some(0));
    let send = [
        "send",
        "--to",
        "b",
        "--subject",
        "hi",
        "--body",
        "x",
        "--client-id",
        "c1",
    ];
    let (_, _, status) = call_socket(&socket, &send, None);
    assert_eq!(status, Some(0));
    let (_, _, status) = call_socket(&socket, &send, None);
    assert_eq!(status, Some(0), "a retried send is not a second post");
    let (_, err, status) = call_socket(
        &socket,
        &["send", "--to", "zed", "--subject", "s", "--body", "x"],
        None,
    );
    assert_eq!(status, Some(1), "{err}");
    // garbage, an unknown frame kind, an oversized frame: each closed, counted, logged
    let (_, _, status) = call_socket(&socket, &[], Some(b"GET / HTTP/1.1\r\n\r\n"));
    assert_eq!(status, None, "another protocol gets no answer");
    let mut unknown = frame::MAGIC.to_vec();
    unknown.extend(frame_bytes(b'Q', b""));
    let (_, err, status) = call_socket(&socket, &[], Some(&unknown));
    assert_eq!(status, Some(2), "{err}");
    let mut oversize = frame::MAGIC.to_vec();
    oversize.extend([op::ARG, 0x7f, 0xff, 0xff, 0xff]);
    let (_, err, status) = call_socket(&socket, &[], Some(&oversize));
    assert_eq!(status, Some(2), "{err}");
    // the server goes on
    let (_, _, status) = call_socket(&socket, &["sent"], None);
    assert_eq!(status, Some(0));

    let lines = malformed_lines(&state.join("mail/g/log.jsonl"));
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l["from"] == "a"), "{lines:?}");
    assert!(
        lines[2]["reason"]
            .as_str()
            .unwrap()
            .contains("exceeds the limit"),
        "{lines:?}"
    );

    let record = door.close().unwrap();
    assert_eq!(
        (
            record.posted,
            record.delivered,
            record.refused,
            record.malformed
        ),
        (1, 1, 1, 3),
        "{record:?}"
    );
    assert!(!socket.exists(), "the socket is removed");
    let tasks = other.tasks().unwrap();
    assert!(
        tasks.iter().any(|i| i.task == t("a") && i.ended),
        "{tasks:?}"
    );
    // the next session opens it again
    let again = request.open(&settings, std::time::Duration::ZERO).unwrap();
    drop(again);
    let tasks = other.tasks().unwrap();
    assert!(
        tasks.iter().any(|i| i.task == t("a") && i.ended),
        "dropped: ended"
    );
}

/// A sandbox looping on garbage fills neither the log nor the disk: every malformed connection
/// is counted, at most ten a minute are logged (spec-note 0532).
#[test]
fn malformed_connections_are_counted_and_logged_at_most_ten_a_minute() {
    use crate::settings::MailSettings;
    let state = tempfile::tempdir().unwrap();
    let settings = MailSettings::default();
    let m = mediator(state.path(), "g", &settings, &["a"]);
    let log = m.log_path().to_path_buf();
    let door = MailDoor::new(Arc::new(m), 64);
    for i in 0..15 {
        door.refused("a", &format!("channel: bad frame {i}"));
    }
    assert_eq!(door.counts().malformed, 15);
    let lines = malformed_lines(&log);
    assert_eq!(lines.len(), commands::MALFORMED_LOGGED_PER_MINUTE as usize);
    assert_eq!(lines[0]["reason"], "channel: bad frame 0");
}

#[test]
fn an_answer_is_bounded_and_never_larger_than_the_client_accepts() {
    use crate::settings::MailSettings;
    let state = tempfile::tempdir().unwrap();
    let settings = MailSettings {
        messages_per_minute: 1_000,
        ..MailSettings::default()
    };
    let m = mediator(state.path(), "g", &settings, &["a", "b"]);
    let door = MailDoor::new(Arc::new(m), settings.max_message_bytes);
    let body = "\u{1}".repeat(10_000);
    for i in 0..(commands::MAX_LISTED + 20) {
        let argv: Vec<String> = ["send", "--to", "b", "--subject", &format!("m{i}")]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let a = door.handle("a", &argv, &mut Given(Some(body.clone().into_bytes())));
        assert_eq!(a.status, 0, "{}", String::from_utf8_lossy(&a.stderr));
    }
    for (who, command) in [("a", "sent"), ("b", "inbox")] {
        let argv: Vec<String> = [command, "--format", "json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let a = door.handle(who, &argv, &mut Given(None));
        assert_eq!(a.status, 0);
        let listed: Vec<serde_json::Value> = serde_json::from_slice(&a.stdout).unwrap();
        assert_eq!(listed.len(), commands::MAX_LISTED, "{command}");
        assert!(
            a.stdout.len() < 16 * 1024 * 1024,
            "{command}: {}",
            a.stdout.len()
        );
    }
}

/// G8 (session 17): a multi-repository task `T` and a single-repository task `T` of its first
/// repository have one name in one group. While one runs its channel, the other is refused
/// at once, naming the task that holds the name; it never takes the first one's socket over
/// (nor waits for it as for a replaced session of the same task). The same task is still
/// only `Busy` (it waits for its replaced session).
#[test]
fn a_different_task_of_the_same_name_is_refused_while_the_first_runs() {
    use crate::mail::{GroupName, TaskName};
    use crate::settings::MailSettings;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let multi = tmp.path().join("tasks/multi-t");
    let single = tmp.path().join("tasks/single-t");
    for f in [&multi, &single] {
        std::fs::create_dir_all(f).unwrap();
    }
    let settings = MailSettings::default();
    let group = GroupName::new("g").unwrap();
    let request = |owner: &std::path::Path| {
        DoorRequest::prepare(&state, group.clone(), TaskName::new("t").unwrap(), None)
            .unwrap()
            .owned_by(owner)
    };
    let first = request(&multi)
        .open(&settings, std::time::Duration::ZERO)
        .unwrap();
    let socket = first.record().host_socket;
    let started = std::time::Instant::now();
    let taken = request(&single)
        .open(&settings, std::time::Duration::from_secs(30))
        .unwrap_err();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "refused at once"
    );
    assert!(
        matches!(taken, DoorError::NameTaken { ref task, ref other }
            if task == "t" && *other == std::fs::canonicalize(&multi).unwrap()),
        "{taken}"
    );
    assert!(taken.to_string().contains("already live"), "{taken}");
    assert!(socket.exists(), "the first task's socket is left alone");
    let same = request(&multi)
        .open(&settings, std::time::Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(same, DoorError::Busy { .. }), "{same}");
    drop(first);
    // once the first has ended, the name is free again
    let second = request(&single)
        .open(&settings, std::time::Duration::ZERO)
        .unwrap();
    drop(second);
}

/// Issue 30: commands other than sends are rate-bounded too. A task polling `inbox` more than
/// [`commands::COMMANDS_PER_MINUTE`] times in a minute is refused (`mail.rate_limited`, exit 1,
/// a retry time) and nothing changes; another task is not affected; a send still goes (it has
/// its own bound).
#[test]
fn polling_the_inbox_without_pause_is_rate_bounded() {
    use crate::settings::MailSettings;
    let state = tempfile::tempdir().unwrap();
    let settings = MailSettings::default();
    let m = mediator(state.path(), "g", &settings, &["a", "b"]);
    let door = MailDoor::new(Arc::new(m), settings.max_message_bytes);
    let run = |who: &str, args: &[&str]| {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        door.handle(who, &argv, &mut Given(None))
    };
    for _ in 0..commands::COMMANDS_PER_MINUTE {
        assert_eq!(run("a", &["inbox"]).status, 0);
    }
    let refused = run("a", &["inbox"]);
    assert_eq!(refused.status, 1);
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("mail.rate_limited"), "{text}");
    assert!(text.contains("retry in"), "{text}");
    assert_eq!(run("a", &["sent"]).status, 1);
    assert_eq!(
        run("b", &["inbox"]).status,
        0,
        "another task is not bounded"
    );
    let sent = run("a", &["send", "--to", "b", "--subject", "s", "--body", "x"]);
    assert_eq!(sent.status, 0, "{}", String::from_utf8_lossy(&sent.stderr));
    assert_eq!(door.counts().refused, 2);
}

/// The user's escalation command through the real channel (spec-note 0533): a session's door
/// opened with `[mail] escalate_command`, the real static `devcell-mail` sending a request the
/// policy escalates, with shell metacharacters in its subject and body. The command ran once,
/// with the message's id, sender, recipient, type and subject as its environment values;
/// nothing the text names ran (no marker file appeared); the message is held and escalated.
#[test]
fn an_escalated_message_runs_the_users_command_once_and_nothing_its_text_names() {
    use crate::mail::test_support::escalate_rule;
    use crate::mail::{GroupName, RecipientState, TaskName};
    use crate::settings::MailSettings;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let markers = tmp.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let ran = tmp.path().join("ran");
    let m = markers.display();
    // the subject is bounded (200 characters): three forms there, the rest in the body
    let hostile = format!("x'; touch {m}/q1; \" $(touch {m}/q2) `touch {m}/q3`");
    let body = format!("| touch {m}/q4 && touch {m}/q5 ${{IFS}}>{m}/q6 $(touch {m}/q7)");
    let script = format!(
        "printf '%s\\n' \"$#\" \"$1\" \"$DEVCELL_MAIL_ID\" \"$DEVCELL_MAIL_FROM\" \"$DEVCELL_MAIL_TO\" \"$DEVCELL_MAIL_TYPE\" \"$DEVCELL_MAIL_SUBJECT\" >> '{}'",
        ran.display()
    );
    let settings = MailSettings {
        rules: vec![escalate_rule("*", "*", "request")],
        escalate_command: vec![
            "/bin/sh".into(),
            "-c".into(),
            script,
            "hook".into(),
            "fixed".into(),
        ],
        ..MailSettings::default()
    };
    let group = GroupName::new("g").unwrap();
    let t = |n: &str| TaskName::new(n).unwrap();
    let request = DoorRequest::prepare(&state, group.clone(), t("a"), None).unwrap();
    let door = request.open(&settings, std::time::Duration::ZERO).unwrap();
    let other = mediator(&state, group.as_str(), &settings, &["b"]);

    let client = install_client(&state).unwrap();
    let out = std::process::Command::new(&client)
        .args([
            "send",
            "--to",
            "b",
            "--type",
            "request",
            "--subject",
            &hostile,
            "--body",
            &body,
        ])
        .env("DEVCELL_MAIL_SOCKET", door.record().host_socket)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let id = printed.lines().next().unwrap_or_default().to_string();
    assert!(
        id.starts_with('m'),
        "the message id is printed first: {printed}"
    );
    assert!(printed.contains("b: held"), "{printed}");

    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        format!("1\nfixed\n{id}\na\nb\nrequest\n{hostile}\n"),
        "ran once, with its own arguments and the message's fields as values"
    );
    let made: Vec<_> = std::fs::read_dir(&markers).unwrap().collect();
    assert!(made.is_empty(), "the text ran nothing: {made:?}");
    let id = crate::mail::MessageId::new(&id).unwrap();
    let view = other.show(&id).unwrap();
    assert_eq!(view.recipients[&t("b")].state, RecipientState::Held);
    assert!(view.recipients[&t("b")].escalated);
    let log = std::fs::read_to_string(state.join("mail/g/log.jsonl")).unwrap();
    let ran_lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "escalation-ran")
        .collect();
    assert_eq!(ran_lines.len(), 1, "{ran_lines:?}");
    assert_eq!(ran_lines[0]["exit"], 0);
    assert_eq!(ran_lines[0]["command"], "/bin/sh");
    door.close().unwrap();
}

/// A devcell killed between holding an escalated message and running the command (the log
/// cut back before its `escalation-started` line): the next session's door of the group runs
/// it, once, beside the session, and its close waits for the run (spec-note 0533).
#[test]
fn the_next_sessions_door_runs_an_escalation_a_killed_devcell_left_unrun() {
    use crate::mail::test_support::escalate_rule;
    use crate::mail::{
        Bounds, Draft, Escalation, GroupName, Mediator, MessageType, Policy, TaskName,
    };
    use crate::settings::MailSettings;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let ran = tmp.path().join("ran");
    let settings = MailSettings {
        rules: vec![escalate_rule("*", "*", "request")],
        escalate_command: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("echo \"$DEVCELL_MAIL_ID\" >> '{}'", ran.display()),
        ],
        ..MailSettings::default()
    };
    let group = GroupName::new("g").unwrap();
    let t = |n: &str| TaskName::new(n).unwrap();
    let killed = Mediator::open(
        &state,
        &group,
        Policy::from_settings(&settings).unwrap(),
        Bounds::from_settings(&settings),
    )
    .unwrap()
    .with_escalation(Escalation::from_settings(&settings).unwrap());
    killed.register(&t("a"), None).unwrap();
    killed.register(&t("b"), None).unwrap();
    let draft = Draft::new(vec![t("b")], MessageType::Request, "please", "x");
    let receipt = killed.send(&t("a"), draft).unwrap();
    let log = state.join("mail/g/log.jsonl");
    let kept: String = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"event\":\"escalation-"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, kept).unwrap();
    std::fs::remove_file(&ran).unwrap();

    let request = DoorRequest::prepare(&state, group, t("c"), None).unwrap();
    let door = request.open(&settings, std::time::Duration::ZERO).unwrap();
    door.close().unwrap();
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        format!("{}\n", receipt.id),
        "run once by the next session's door"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("\"event\":\"escalation-started\"").count(), 1);
    assert_eq!(text.matches("\"event\":\"escalation-ran\"").count(), 1);
}
