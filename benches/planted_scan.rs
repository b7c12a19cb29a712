//! Criterion benchmark of the planted scan (`security::planted`, attack K11): the walk of a
//! workspace for set-id files and devices that every `devcell exec` runs after its command and
//! `status` runs to report, over a generated tree of 100,000 entries (1,000 folders of 99
//! files each, two levels deep) on a temporary folder. The number to read is the time of one
//! scan on this disk, warm cache: `status`'s report-only scan and `exec`'s scan that clears.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use devcell::security::planted::{ScanOptions, scan_and_clear_with};

/// Folders, and files in each: 1,000 × (1 + 99) = 100,000 entries.
const FOLDERS: usize = 1_000;
const FILES: usize = 99;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for f in 0..FOLDERS {
        let folder = dir
            .path()
            .join(format!("d{}", f / 32))
            .join(format!("f{f}"));
        std::fs::create_dir_all(&folder).expect("folder");
        for n in 0..FILES {
            std::fs::write(folder.join(format!("file{n}.rs")), b"x").expect("file");
        }
    }
    dir
}

fn bench(c: &mut Criterion) {
    let dir = tree();
    let mut g = c.benchmark_group("planted_scan_100k");
    g.sample_size(10);
    g.bench_function("status_report_only", |b| {
        b.iter(|| {
            let options = ScanOptions {
                report_only: true,
                ..ScanOptions::default()
            };
            scan_and_clear_with(black_box(dir.path()), options).len()
        })
    });
    g.bench_function("exec_scan_and_clear", |b| {
        b.iter(|| scan_and_clear_with(black_box(dir.path()), ScanOptions::default()).len())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
