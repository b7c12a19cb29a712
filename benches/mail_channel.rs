//! Benchmark of mail through the real channel (issue 30): each task's session door (its own
//! Unix socket and server, spec-note 0531) in front of the group's mediator (0530), on a
//! temporary folder. `benches/mail.rs` times the mediator alone; this adds the socket, the
//! framing, the command line and the answer, as a sandbox sees them.
//!
//! Prints, in ms:
//! - send-to-inbox latency: task `a` sends to `b` over `a`'s socket, `b` lists its inbox over
//!   its own socket until the message is there, then reads it (so the inbox stays short):
//!   median and 90th percentile of send→seen, and of the whole round trip;
//! - the same with the real static `devcell-mail` started for each command (what an agent's
//!   shell pays: a process per command);
//! - messages per second: one task sending back to back, then four tasks at once (each its
//!   own socket and thread), each send an fsync'd transaction of the shared log.
//!
//! Fixed counts, not criterion's adaptive ones: a task may run 600 commands other than `send`
//! a minute (spec-note 0532), so the recipient's commands are counted to stay under it.
//! Run: `cargo bench --bench mail_channel` (`--profile dev` for a debug build).

// a benchmark's report is its output
#![allow(clippy::print_stdout)]

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use devcell::handoff::door::frame::{self, op};
use devcell::handoff::door::{DoorRequest, SessionDoor, install_client};
use devcell::mail::{Bounds, GroupName, Mediator, Policy, TaskName};
use devcell::settings::MailSettings;

/// Round trips through raw frames (the recipient runs two commands each).
const ROUND_TRIPS: usize = 200;
/// Round trips with the real client (two more recipient commands each).
const CLIENT_ROUND_TRIPS: usize = 40;
/// Messages sent back to back by one task.
const SENDS: usize = 500;
/// Senders at once, and messages each.
const PARALLEL_SENDERS: usize = 4;
const PARALLEL_SENDS: usize = 200;

/// A way to run one mail command on a socket: (status, stdout).
type Command<'a> = dyn Fn(&Path, &[&str]) -> (u8, String) + 'a;

/// One command over `socket` as raw frames: (status, stdout).
fn call(socket: &Path, argv: &[&str]) -> (u8, String) {
    let mut s = UnixStream::connect(socket).expect("connect");
    let mut bytes = frame::MAGIC.to_vec();
    for a in argv {
        frame::write_frame(&mut bytes, op::ARG, a.as_bytes()).expect("frame");
    }
    frame::write_frame(&mut bytes, op::GO, b"").expect("frame");
    s.write_all(&bytes).expect("write");
    let mut back = Vec::new();
    s.read_to_end(&mut back).expect("read");
    let (mut out, mut status) = (String::new(), 255);
    let mut r = back.as_slice();
    while let Some((kind, payload)) =
        frame::read_frame(&mut r, op::FROM_HOST, 1 << 24).expect("answer")
    {
        match kind {
            op::STDOUT => out.push_str(&String::from_utf8_lossy(&payload)),
            op::EXIT => status = payload.first().copied().unwrap_or(255),
            _ => {}
        }
    }
    (status, out)
}

/// One command through the real `devcell-mail`: (status, stdout).
fn call_client(client: &Path, socket: &Path, argv: &[&str]) -> (u8, String) {
    let out = std::process::Command::new(client)
        .args(argv)
        .env("DEVCELL_MAIL_SOCKET", socket)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("devcell-mail runs");
    (
        out.status.code().unwrap_or(255) as u8,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// One latency line: label, median and 90th percentile in ms.
fn line(label: &str, median: f64, p90: f64) {
    println!("{label:<56} median {median:7.2} ms, p90 {p90:7.2} ms");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// (median, 90th percentile) in ms.
fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort_unstable();
    let at = |q: f64| ms(v[((v.len() - 1) as f64 * q).round() as usize]);
    (at(0.5), at(0.9))
}

/// `n` round trips a → b: send, b's inbox until the message is there, b reads it. Returns
/// (send→seen, whole round trip) per trip.
fn round_trips(n: usize, run: &Command, a: &Path, b: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let (mut seen, mut whole) = (Vec::new(), Vec::new());
    for i in 0..n {
        let subject = format!("round trip {i}");
        let t0 = Instant::now();
        let (status, out) = run(
            a,
            &["send", "--to", "b", "--subject", &subject, "--body", "x"],
        );
        assert_eq!(status, 0, "send: {out}");
        let id = out.lines().next().unwrap_or_default().to_string();
        let (status, inbox) = run(b, &["inbox", "--format", "json"]);
        assert_eq!(status, 0, "inbox: {inbox}");
        assert!(inbox.contains(&id), "the message is in b's inbox at once");
        seen.push(t0.elapsed());
        let (status, out) = run(b, &["read", &id]);
        assert_eq!(status, 0, "read: {out}");
        whole.push(t0.elapsed());
    }
    (seen, whole)
}

/// `senders` tasks each sending `each` messages to `to` at once, over their own sockets;
/// messages per second overall.
fn throughput(sockets: &[PathBuf], each: usize, to: &str) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for socket in sockets {
            s.spawn(move || {
                for i in 0..each {
                    let subject = format!("load {i}");
                    let (status, out) = call(
                        socket,
                        &["send", "--to", to, "--subject", &subject, "--body", "x"],
                    );
                    assert_eq!(status, 0, "send: {out}");
                }
            });
        }
    });
    (sockets.len() * each) as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used here
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path();
    let settings = MailSettings {
        messages_per_minute: u32::MAX,
        max_log_bytes: u64::MAX / 8,
        ..MailSettings::default()
    };
    let group = GroupName::new("bench").expect("name");
    let task = |n: &str| TaskName::new(n).expect("name");
    let open = |n: &str| -> SessionDoor {
        DoorRequest::prepare(state, group.clone(), task(n), Some(format!("devcell/{n}")))
            .expect("prepare")
            .open(&settings, Duration::ZERO)
            .expect("open")
    };
    let doors: Vec<SessionDoor> = ["a", "b", "s1", "s2", "s3", "s4"]
        .iter()
        .map(|n| open(n))
        .collect();
    let socket = |i: usize| doors[i].record().host_socket;
    // the sink of the throughput runs: registered, no socket (nobody reads it)
    let m = Mediator::open(
        state,
        &group,
        Policy::from_settings(&settings).expect("policy"),
        Bounds::from_settings(&settings),
    )
    .expect("mediator");
    m.register(&task("sink"), None).expect("register");
    let client = install_client(state).expect("client");

    println!(
        "mail through the channel (socket + server + mediator, fsync'd log), {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (a, b) = (socket(0), socket(1));
    let (seen, whole) = round_trips(ROUND_TRIPS, &call, &a, &b);
    let (s50, s90) = percentiles(seen);
    let (w50, w90) = percentiles(whole);
    line(
        &format!("send -> in b's inbox, raw frames ({ROUND_TRIPS}x)"),
        s50,
        s90,
    );
    line("send, inbox, read round trip, raw frames", w50, w90);
    let with_client = |s: &Path, argv: &[&str]| call_client(&client, s, argv);
    let (seen, whole) = round_trips(CLIENT_ROUND_TRIPS, &with_client, &a, &b);
    let (s50, s90) = percentiles(seen);
    let (w50, w90) = percentiles(whole);
    line(
        &format!("send -> in b's inbox, devcell-mail ({CLIENT_ROUND_TRIPS}x)"),
        s50,
        s90,
    );
    line("send, inbox, read round trip, devcell-mail", w50, w90);
    let one = throughput(std::slice::from_ref(&a), SENDS, "sink");
    println!(
        "{:<56} {one:7.0}",
        format!("messages per second, 1 sender ({SENDS} sends)")
    );
    let senders: Vec<PathBuf> = (2..2 + PARALLEL_SENDERS).map(socket).collect();
    let many = throughput(&senders, PARALLEL_SENDS, "sink");
    println!(
        "{:<56} {many:7.0}",
        format!("messages per second, {PARALLEL_SENDERS} senders at once ({PARALLEL_SENDS} each)")
    );
    for door in doors {
        door.close().expect("close");
    }
}
