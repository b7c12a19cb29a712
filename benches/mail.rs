//! Criterion benchmark of the mail store: one round trip (a send, the recipient's inbox, its
//! ack), each an fsync'd transaction on the group's log, on a temporary folder. The
//! number to read is round trips per second on this disk; the socket between a container and
//! the host is not part of it.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use devcell::mail::{Bounds, Draft, GroupName, Mediator, MessageType, Policy, TaskName};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let bounds = Bounds {
        messages_per_minute: u32::MAX,
        max_log_bytes: u64::MAX,
        ..Bounds::default()
    };
    let group = GroupName::new("bench").expect("name");
    let m = Mediator::open(dir.path(), &group, Policy::forward_all(), bounds).expect("opens");
    let (a, b) = (
        TaskName::new("a").expect("name"),
        TaskName::new("b").expect("name"),
    );
    m.register(&a, Some("devcell/a")).expect("register");
    m.register(&b, Some("devcell/b")).expect("register");
    let mut g = c.benchmark_group("mail");
    g.throughput(Throughput::Elements(1));
    g.sample_size(30);
    g.bench_function("send_inbox_ack_round_trip", |bench| {
        bench.iter(|| {
            let draft = Draft::new(vec![b.clone()], MessageType::Notice, "subject", "body");
            let id = m.send(&a, draft).expect("sent").id;
            let inbox = m.inbox(&b).expect("inbox");
            m.ack(&b, black_box(&id)).expect("ack");
            inbox.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
