//! Criterion benchmarks of the config layer on a large real config from the corpus
//! (`tests/corpus/050-0xjuaan-cs50`, ~6 KB with ~90 settings): parse (JSONC → value),
//! validate (typed model), substitute (+ workspace defaults), merge (metadata merge) and all
//! four in a row.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use devcell::config::{jsonc, metadata, model, workspace};

fn corpus_config() -> (PathBuf, String) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/050-0xjuaan-cs50/ws/.devcontainer.json");
    let text = std::fs::read_to_string(&file).expect("corpus config");
    (file, text)
}

fn bench(c: &mut Criterion) {
    let (file, text) = corpus_config();
    // The `jsonc-parser` AST alone, to see devcell's own share of `parse`.
    c.bench_function("jsonc_parser_ast", |b| {
        b.iter(|| {
            jsonc_parser::parse_to_ast(black_box(&text), &Default::default(), &Default::default())
                .expect("parses")
                .value
                .is_some()
        })
    });
    c.bench_function("parse", |b| {
        b.iter(|| jsonc::parse(black_box(&file), black_box(&text)).expect("parses"))
    });
    let doc = jsonc::parse(&file, &text).expect("parses");
    c.bench_function("validate", |b| {
        b.iter(|| model::validate(black_box(&doc)).expect("valid"))
    });
    let opts = workspace::ResolveOptions {
        workspace_folder: file.parent().expect("ws").to_owned(),
        config_file: file.clone(),
        mount_workspace_git_root: false,
        env: HashMap::from([("HOME".to_owned(), "/home/bench".to_owned())]),
    };
    c.bench_function("substitute", |b| {
        b.iter(|| {
            let mut value = doc.value.clone();
            workspace::resolve(black_box(&mut value), &opts).expect("resolves");
            value
        })
    });
    let mut substituted = doc.value.clone();
    workspace::resolve(&mut substituted, &opts).expect("resolves");
    c.bench_function("merge", |b| {
        b.iter(|| {
            let entries = [metadata::config_entry(black_box(&substituted))];
            metadata::merge_configuration(&substituted, &entries)
        })
    });
    c.bench_function("parse+validate+substitute+merge", |b| {
        b.iter(|| {
            let doc = jsonc::parse(black_box(&file), black_box(&text)).expect("parses");
            model::validate(&doc).expect("valid");
            let mut value = doc.value;
            workspace::resolve(&mut value, &opts).expect("resolves");
            let entries = [metadata::config_entry(&value)];
            metadata::merge_configuration(&value, &entries)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
