//! Criterion benchmark of the Features layer's warm path: `build::plan` (read and hash two
//! local fixture Features, render the Dockerfile, scripts and label, compute the cache tag).
//! With the tag present this is all devcell does before reusing the image (spec-note 0121).

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use devcell::build::{self, BaseImage, FeatureLayer, FeaturesInput};
use devcell::features::options::ResolvedOptions;
use serde_json::{Value, json};

fn layer(id: &str) -> FeatureLayer {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/features/build")
        .join(id);
    let text = std::fs::read_to_string(dir.join("devcontainer-feature.json")).expect("fixture");
    let metadata: Value = serde_json::from_str(&text).expect("JSON");
    FeatureLayer::new(
        &format!("./{id}"),
        dir,
        metadata,
        &ResolvedOptions::new(),
        None,
    )
    .expect("layer")
}

fn bench(c: &mut Criterion) {
    let input = FeaturesInput {
        base: BaseImage {
            reference: "devcell-test/busybox:1".into(),
            id: "sha256:0000".into(),
            user: "dev".into(),
            metadata: vec![json!({"remoteUser": "dev"})],
        },
        features: vec![layer("write-message"), layer("use-path")],
        config: json!({"postStartCommand": "echo start", "customizations": {"x": {"y": 1}}}),
        container_user: None,
        remote_user: None,
    };
    c.bench_function("features_plan", |b| {
        b.iter(|| build::plan(black_box(&input)).expect("plan"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
