//! Control "teardown": What proves the run is gone? Looks at the workspace label `devcell delete`
//! finds the container by, volumes that outlive the container, `--rm`.

use super::{mount_subject, volume_owned};
use crate::names;
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountFact, MountKind};
use crate::security::audit::heuristics::is_anonymous_volume;
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for teardown.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    _ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    let labelled = f.labels.as_ref().map(|l| l.get(names::LOCAL_FOLDER_LABEL));
    let foreign: Vec<&MountFact> = f
        .mounts
        .iter()
        .filter(|m| {
            m.kind == MountKind::Volume
                && !volume_owned(m)
                && m.volume_name
                    .as_deref()
                    .is_none_or(|n| !is_anonymous_volume(n))
        })
        .collect();
    match labelled {
        None => out.push(ev(
            "labels",
            "not observable from inside: cannot tell whether `devcell delete` finds everything",
            Risk::Weak,
        )),
        Some(Some(folder)) => out.push(ev(
            format!("label {}", names::LOCAL_FOLDER_LABEL),
            format!("labelled for workspace `{folder}`: `devcell delete` finds the container and its volumes"),
            Risk::Safe,
        )),
        Some(None) => out.push(ev(
            "labels",
            format!(
                "no `{}` label: no tool knows this container belongs to a workspace; cleanup is manual",
                names::LOCAL_FOLDER_LABEL
            ),
            if foreign.is_empty() { Risk::Weak } else { Risk::Critical },
        )),
    }
    for m in &f.mounts {
        if m.kind != MountKind::Volume {
            continue;
        }
        let (detail, risk) = if volume_owned(m) {
            (
                "devcell-owned volume, removed by `devcell delete`",
                Risk::Safe,
            )
        } else if m.volume_name.as_deref().is_some_and(is_anonymous_volume) {
            (
                "anonymous volume, removed with the container (`rm -v`)",
                Risk::Safe,
            )
        } else if m.volume_name.is_none() {
            (
                "volume of unknown name: may outlive the container",
                Risk::Weak,
            )
        } else {
            (
                "named volume not owned by devcell: outlives the container",
                Risk::Weak,
            )
        };
        out.push(ev(mount_subject(m), detail, risk));
    }
    if f.auto_remove {
        out.push(ev(
            "auto-remove",
            "the engine removes the container when it stops",
            Risk::Safe,
        ));
    }
    out
}
