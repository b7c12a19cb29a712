//! A host-side record of the run-once markers devcell has *seen* in a container, so a warm `up`
//! decides that the hooks already ran without any request beyond its one inspect (spec-note
//! 0471).
//!
//! The markers in the container stay the source of truth (the reference CLI's files,
//! spec-notes 0101 and 0181): this record only remembers, per container id, the marker values
//! a read of them found equal to the container's current `Created` / `State.StartedAt`. A
//! record is trusted only while those values are unchanged, so a restart (new `StartedAt`) or a
//! new container (new id) reads the container again. It lives under the state root
//! (`<root>/markers/<container id>.json`, `0600`), is written atomically, and records older
//! than [`MAX_AGE`] are removed when a new one is written. Losing it costs one read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::lifecycle::{
    LifecycleReport, MarkerContext, Plan, RunCondition, SkipReason, SkippedHook,
};
use crate::ops::state_folder;

/// Records not written for this long are removed (their containers are long gone or idle).
pub const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

fn record_path(root: Option<&Path>, container_id: &str) -> Option<PathBuf> {
    // A container id is hex; anything else is not recorded (never a path component).
    if container_id.is_empty() || !container_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(root?.join("markers").join(format!("{container_id}.json")))
}

fn read(root: Option<&Path>, container_id: &str) -> BTreeMap<String, String> {
    record_path(root, container_id)
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Whether every stage of `plan` is a run-once stage, i.e. one a marker can settle.
fn all_marked(plan: &Plan) -> bool {
    let mut stages = plan.stages().peekable();
    stages.peek().is_some() && stages.all(|s| s.condition == RunCondition::UnlessMarked)
}

/// The report of skipping every stage of `plan` when the record says each one's marker holds
/// the current value (as [`crate::lifecycle::run_plan`] would report it); `None` otherwise.
/// The record lives under [`state_folder::default_root`].
pub fn already_ran(
    container_id: &str,
    plan: &Plan,
    markers: &MarkerContext,
) -> Option<LifecycleReport> {
    already_ran_in(
        state_folder::default_root().as_deref(),
        container_id,
        plan,
        markers,
    )
}

fn already_ran_in(
    root: Option<&Path>,
    container_id: &str,
    plan: &Plan,
    markers: &MarkerContext,
) -> Option<LifecycleReport> {
    if !all_marked(plan) {
        return None;
    }
    let seen = read(root, container_id);
    let mut report = LifecycleReport {
        runs: Vec::new(),
        skipped: plan.skipped.clone(),
        dotfiles: None,
    };
    for stage in plan.stages() {
        let current = markers.value_for(stage.hook)?;
        if seen.get(stage.hook.property()).map(String::as_str) != Some(current) {
            return None;
        }
        report.skipped.push(SkippedHook {
            hook: stage.hook,
            reason: SkipReason::AlreadyRan,
        });
    }
    Some(report)
}

/// Remembers that a read of the container's markers found every stage of `plan` already ran
/// (`report` ran nothing). Best effort: a record that cannot be written is simply absent.
pub fn remember(
    container_id: &str,
    plan: &Plan,
    markers: &MarkerContext,
    report: &LifecycleReport,
) {
    remember_in(
        state_folder::default_root().as_deref(),
        container_id,
        plan,
        markers,
        report,
    );
}

fn remember_in(
    root: Option<&Path>,
    container_id: &str,
    plan: &Plan,
    markers: &MarkerContext,
    report: &LifecycleReport,
) {
    if !all_marked(plan) || !report.runs.is_empty() {
        return;
    }
    let Some(path) = record_path(root, container_id) else {
        return;
    };
    let mut seen = read(root, container_id);
    for stage in plan.stages() {
        if let Some(value) = markers.value_for(stage.hook) {
            seen.insert(stage.hook.property().to_string(), value.to_string());
        }
    }
    let _ = write(&path, &seen);
}

fn write(path: &Path, seen: &BTreeMap<String, String>) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = path.parent().unwrap_or(path);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&serde_json::to_vec(seen)?)?;
    tmp.persist(path).map_err(|e| e.error)?;
    // Old records go (best effort).
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > MAX_AGE);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::{BringUpKind, HookSources, PlanOptions};
    use serde_json::json;

    fn plan(kind: BringUpKind) -> Plan {
        let sources = HookSources::from_metadata(
            &[json!({"onCreateCommand": "a", "postCreateCommand": "b"})],
            None,
        )
        .unwrap();
        Plan::new(
            &sources,
            crate::lifecycle::LifecycleHook::UpdateContentCommand,
            kind,
            PlanOptions::default(),
        )
    }

    #[test]
    fn only_a_record_of_the_current_values_skips_and_only_hex_ids_are_recorded() {
        let state = tempfile::tempdir().unwrap();
        let root = Some(state.path());
        let markers = MarkerContext {
            created_at: "2026-01-01T00:00:00Z".into(),
            started_at: "2026-01-01T00:00:01Z".into(),
            folder: None,
            running_folder: None,
        };
        let running = plan(BringUpKind::Running);
        assert!(already_ran_in(root, "abc123", &running, &markers).is_none());
        let nothing_ran = LifecycleReport::default();
        remember_in(root, "abc123", &running, &markers, &nothing_ran);
        let report = already_ran_in(root, "abc123", &running, &markers).expect("recorded");
        assert!(report.runs.is_empty());
        assert_eq!(
            report
                .skipped
                .iter()
                .filter(|s| s.reason == SkipReason::AlreadyRan)
                .count(),
            2
        );
        // Another creation time (a different container state) is not covered.
        let newer = MarkerContext {
            created_at: "2026-02-02T00:00:00Z".into(),
            ..markers.clone()
        };
        assert!(already_ran_in(root, "abc123", &running, &newer).is_none());
        // A new container's plan (hooks due) is never settled by the record.
        assert!(already_ran_in(root, "abc123", &plan(BringUpKind::Created), &markers).is_none());
        // Ids that are not hex are never a file name.
        remember_in(root, "../x", &running, &markers, &nothing_ran);
        assert!(!state.path().join("x.json").exists());
        assert_eq!(
            std::fs::read_dir(state.path().join("markers"))
                .unwrap()
                .count(),
            1
        );
    }
}
