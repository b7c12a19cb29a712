//! Which hooks run for a bring-up, in which order, and which must finish before "ready"
//! ([spec: lifecycle](https://containers.dev/implementors/spec/#lifecycle),
//! [`waitFor`](https://containers.dev/implementors/json_reference/#lifecycle-scripts)).

use serde::Serialize;
use serde_json::Value;

use super::error::{LifecycleError, Result};
use super::hook::{HookCommand, describe};
use super::hook_name::LifecycleHook;
use super::report::{SkipReason, SkippedHook};

/// One source's command for one hook: a metadata entry (base image, a Feature) or
/// devcontainer.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcedCommand {
    /// 0-based index of the source: the position in the merged configuration's array
    /// (`postCreateCommands[source]`) or in the metadata entry list.
    pub source: usize,
    /// Property path of the value, e.g. `postCreateCommands[2]`.
    pub path: String,
    /// Who contributed it, when known: a Feature's `id`, or `devcontainer.json`.
    pub origin: Option<String>,
    /// The command (never a no-op: empty values are dropped when parsing).
    pub command: HookCommand,
}

impl SourcedCommand {
    /// How the source is named in messages: `Feature 'ghcr.io/x/y:1'`, `devcontainer.json`,
    /// or the property path (`` `postCreateCommands[2]` ``) when the origin is unknown.
    pub fn origin_label(&self) -> String {
        match self.origin.as_deref() {
            Some("devcontainer.json") => "devcontainer.json".to_string(),
            Some(id) => format!("Feature '{id}'"),
            None => format!("`{}`", self.path),
        }
    }
}

/// The hook commands of a configuration, per hook, in source order (base image entries,
/// Features in install order, devcontainer.json last — the order the spec runs them in).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookSources {
    /// `(hook, commands)` in spec order; hooks without commands have an empty list.
    pub hooks: Vec<(LifecycleHook, Vec<SourcedCommand>)>,
}

impl HookSources {
    /// Reads the hooks of the reference CLI's merged configuration (`mergedConfiguration` of
    /// `read-configuration --include-merged-configuration`): the arrays `onCreateCommands`,
    /// `updateContentCommands`, `postCreateCommands`, `postStartCommands`,
    /// `postAttachCommands` (each element one source's value in string, array or object
    /// form), and `initializeCommand` (a single value; only devcontainer.json sets it).
    ///
    /// A configuration that was not merged (a plain devcontainer.json) is accepted too: when
    /// the array is absent, the singular property (`postCreateCommand`) is one source.
    /// Origins are unknown in this shape, so messages name the property path.
    ///
    /// Errors: [`LifecycleError::InvalidHook`] for a non-array merged property or an element
    /// in a form the spec does not define.
    pub fn from_merged_configuration(merged: &Value) -> Result<HookSources> {
        let mut hooks = Vec::with_capacity(LifecycleHook::ALL.len());
        for hook in LifecycleHook::ALL {
            let mut commands = Vec::new();
            match hook
                .merged_property()
                .and_then(|p| merged.get(p).map(|v| (p, v)))
            {
                Some((property, Value::Array(items))) => {
                    for (source, item) in items.iter().enumerate() {
                        let path = format!("{property}[{source}]");
                        if let Some(command) = HookCommand::parse(hook, &path, item)? {
                            commands.push(SourcedCommand {
                                source,
                                path,
                                origin: None,
                                command,
                            });
                        }
                    }
                }
                Some((_, Value::Null)) => {}
                Some((property, other)) => {
                    return Err(LifecycleError::InvalidHook {
                        hook,
                        path: property.to_string(),
                        expected: "an array of hook values",
                        found: describe(other),
                    });
                }
                None => {
                    if let Some(value) = merged.get(hook.property()) {
                        let path = hook.property().to_string();
                        if let Some(command) = HookCommand::parse(hook, &path, value)? {
                            commands.push(SourcedCommand {
                                source: 0,
                                path,
                                origin: hook
                                    .runs_on_host()
                                    .then(|| "devcontainer.json".to_string()),
                                command,
                            });
                        }
                    }
                }
            }
            hooks.push((hook, commands));
        }
        Ok(HookSources { hooks })
    }

    /// Reads the hooks from image metadata entries (the `devcontainer.metadata` label's
    /// array, with the devcontainer.json entry last) and the devcontainer.json's
    /// `initializeCommand` if given. Values that are falsy in JavaScript (`null`, `false`,
    /// `0`, `""`) are left out as the reference's merge does, so `source` equals the index in
    /// the merged configuration's array. An entry's origin is its `id` (Features), else
    /// `devcontainer.json` (as the reference CLI labels it). `initializeCommand` in an entry is
    /// ignored: Features may not contribute host commands (spec#428).
    ///
    /// Errors: [`LifecycleError::InvalidHook`] as for
    /// [`from_merged_configuration`](Self::from_merged_configuration).
    pub fn from_metadata(
        entries: &[Value],
        initialize_command: Option<&Value>,
    ) -> Result<HookSources> {
        let mut hooks = Vec::with_capacity(LifecycleHook::ALL.len());
        for hook in LifecycleHook::ALL {
            let mut commands = Vec::new();
            if hook.runs_on_host() {
                if let Some(value) = initialize_command {
                    let path = hook.property().to_string();
                    if let Some(command) = HookCommand::parse(hook, &path, value)? {
                        commands.push(SourcedCommand {
                            source: 0,
                            path,
                            origin: Some("devcontainer.json".to_string()),
                            command,
                        });
                    }
                }
            } else {
                // Like the reference's merge, JS-falsy values are left out, so `source` is the
                // position the value has in the merged configuration's array.
                let truthy = entries
                    .iter()
                    .enumerate()
                    .filter_map(|(i, entry)| entry.get(hook.property()).map(|v| (i, entry, v)))
                    .filter(|(_, _, value)| !is_falsy(value));
                for (source, (index, entry, value)) in truthy.enumerate() {
                    let path = format!("devcontainer.metadata[{index}].{}", hook.property());
                    if let Some(command) = HookCommand::parse(hook, &path, value)? {
                        let origin = entry
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("devcontainer.json")
                            .to_string();
                        commands.push(SourcedCommand {
                            source,
                            path,
                            origin: Some(origin),
                            command,
                        });
                    }
                }
            }
            hooks.push((hook, commands));
        }
        Ok(HookSources { hooks })
    }

    /// The commands of one hook, in source order (empty when not configured).
    pub fn commands(&self, hook: LifecycleHook) -> &[SourcedCommand] {
        self.hooks
            .iter()
            .find(|(h, _)| *h == hook)
            .map(|(_, c)| c.as_slice())
            .unwrap_or(&[])
    }
}

/// JavaScript falsiness, as the reference CLI's merge uses to drop hook values.
fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// Reads `waitFor` from a (merged) configuration: the hook up to which bring-up blocks.
/// Default `updateContentCommand`. The schema's five values are accepted, and also
/// `postAttachCommand` (everything blocks) — spec-notes/0102.
///
/// Errors: [`LifecycleError::InvalidWaitFor`] for any other value.
pub fn wait_for(merged: &Value) -> Result<LifecycleHook> {
    match merged.get("waitFor") {
        None | Some(Value::Null) => Ok(LifecycleHook::UpdateContentCommand),
        Some(Value::String(name)) => {
            LifecycleHook::from_property(name).ok_or_else(|| LifecycleError::InvalidWaitFor {
                found: format!("`{name}`"),
            })
        }
        Some(other) => Err(LifecycleError::InvalidWaitFor {
            found: describe(other),
        }),
    }
}

/// What kind of bring-up the hooks run for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BringUpKind {
    /// A container that was just created: every container hook is due.
    Created,
    /// An existing container that was just started again: `postStartCommand` and
    /// `postAttachCommand` are due; once-per-container hooks run only if their marker is
    /// missing (an earlier attempt failed).
    Restarted,
    /// An already running container (re-attach): `postAttachCommand` is due; the others run
    /// only if their marker is missing.
    Running,
}

/// Flags that change the plan, named after the reference CLI's `up` flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// `--skip-post-create`: run no container hook at all (the reference CLI's meaning,
    /// despite the name; spec-notes/0102).
    pub skip_post_create: bool,
    /// `--skip-post-attach`: do not run `postAttachCommand`.
    pub skip_post_attach: bool,
    /// `--skip-non-blocking-commands`: run only the hooks up to `waitFor`.
    pub skip_non_blocking_commands: bool,
    /// `--prebuild`: run `onCreateCommand`, then `updateContentCommand` even if it ran before,
    /// and stop.
    pub prebuild: bool,
    /// `run-user-commands --stop-for-personalization`: run the hooks up to `postCreateCommand`
    /// and the personalization step (dotfiles), then stop: `postStartCommand` and
    /// `postAttachCommand` are skipped (the reference CLI's order).
    pub stop_for_personalization: bool,
}

impl PlanOptions {
    /// Whether a bring-up with these flags and `wait_for` reaches the personalization step
    /// (dotfiles), which comes after `postCreateCommand`: not with `--skip-post-create` or
    /// `--prebuild`, nor with `--skip-non-blocking-commands` when `waitFor` is
    /// `postCreateCommand` or earlier (the reference CLI's order).
    pub fn personalizes(&self, wait_for: LifecycleHook) -> bool {
        let stops_before =
            self.skip_non_blocking_commands && wait_for <= LifecycleHook::PostCreateCommand;
        !(self.skip_post_create || self.prebuild || stops_before)
    }
}

/// When a planned stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RunCondition {
    /// Runs every time; no marker (`postAttachCommand`).
    Always,
    /// Known to be due (new container, new start, `--prebuild` rerun); its marker is
    /// written when it succeeds.
    Due,
    /// Runs only if its marker does not hold the current container's creation (or start)
    /// time; the marker is written when it succeeds.
    UnlessMarked,
}

/// One hook of a plan: its commands in source order and when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// The hook.
    pub hook: LifecycleHook,
    /// Its commands, in source order; never empty in a [`Plan`].
    pub commands: Vec<SourcedCommand>,
    /// When it runs.
    pub condition: RunCondition,
}

/// The in-container hooks of one bring-up, split at `waitFor`.
///
/// Run [`blocking`](Self::blocking) before reporting ready (or handing off to the agent), then
/// [`background`](Self::background). `initializeCommand` is not part of a plan: it runs on the
/// host before any image work ([`initialize_stage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The `waitFor` hook in effect.
    pub wait_for: LifecycleHook,
    /// Stages up to and including `waitFor`, in spec order.
    pub blocking: Vec<Stage>,
    /// Stages after `waitFor`, in spec order.
    pub background: Vec<Stage>,
    /// Container hooks not planned, with the reason, in spec order.
    pub skipped: Vec<SkippedHook>,
}

impl Plan {
    /// Plans the container hooks of a merged configuration (see
    /// [`HookSources::from_merged_configuration`] and [`wait_for`]).
    pub fn from_merged_configuration(
        merged: &Value,
        kind: BringUpKind,
        options: PlanOptions,
    ) -> Result<Plan> {
        let sources = HookSources::from_merged_configuration(merged)?;
        Ok(Plan::new(&sources, wait_for(merged)?, kind, options))
    }

    /// Plans the container hooks for a bring-up of `kind`.
    ///
    /// - Order: `onCreateCommand` → `updateContentCommand` → `postCreateCommand` →
    ///   `postStartCommand` → `postAttachCommand`.
    /// - Conditions: once-per-container hooks are [`Due`](RunCondition::Due) for
    ///   [`Created`](BringUpKind::Created), else [`UnlessMarked`](RunCondition::UnlessMarked);
    ///   `postStartCommand` is `Due` for `Created`/`Restarted`, `UnlessMarked` for `Running`;
    ///   `postAttachCommand` is [`Always`](RunCondition::Always).
    /// - Flags: see [`PlanOptions`]; `--prebuild` forces `updateContentCommand` and drops the
    ///   hooks after it.
    /// - Split: hooks up to and including `wait_for` are blocking; with
    ///   `--skip-non-blocking-commands` the rest are skipped, otherwise they are background.
    pub fn new(
        sources: &HookSources,
        wait_for: LifecycleHook,
        kind: BringUpKind,
        options: PlanOptions,
    ) -> Plan {
        let mut plan = Plan {
            wait_for,
            blocking: Vec::new(),
            background: Vec::new(),
            skipped: Vec::new(),
        };
        for hook in LifecycleHook::CONTAINER {
            let commands = sources.commands(hook);
            let flag = if options.skip_post_create {
                Some("--skip-post-create")
            } else if options.prebuild && hook > LifecycleHook::UpdateContentCommand {
                Some("--prebuild")
            } else if options.stop_for_personalization && hook > LifecycleHook::PostCreateCommand {
                Some("--stop-for-personalization")
            } else if options.skip_post_attach && hook == LifecycleHook::PostAttachCommand {
                Some("--skip-post-attach")
            } else if options.skip_non_blocking_commands && !options.prebuild && hook > wait_for {
                Some("--skip-non-blocking-commands")
            } else {
                None
            };
            if let Some(flag) = flag {
                plan.skipped.push(SkippedHook {
                    hook,
                    reason: SkipReason::Flag(flag),
                });
                continue;
            }
            if commands.is_empty() {
                plan.skipped.push(SkippedHook {
                    hook,
                    reason: SkipReason::NotConfigured,
                });
                continue;
            }
            let condition = match (hook, kind) {
                (LifecycleHook::PostAttachCommand, _) => RunCondition::Always,
                (LifecycleHook::UpdateContentCommand, _) if options.prebuild => RunCondition::Due,
                (_, BringUpKind::Created) => RunCondition::Due,
                (LifecycleHook::PostStartCommand, BringUpKind::Restarted) => RunCondition::Due,
                _ => RunCondition::UnlessMarked,
            };
            let stage = Stage {
                hook,
                commands: commands.to_vec(),
                condition,
            };
            if hook <= wait_for || options.prebuild {
                plan.blocking.push(stage);
            } else {
                plan.background.push(stage);
            }
        }
        plan
    }

    /// All planned stages in run order (blocking, then background).
    pub fn stages(&self) -> impl Iterator<Item = &Stage> {
        self.blocking.iter().chain(self.background.iter())
    }
}

/// The `initializeCommand` stage, if configured: it runs on the host, in the local workspace
/// folder, at every bring-up (create, start, re-attach), before any image work
/// ([spec](https://containers.dev/implementors/json_reference/#lifecycle-scripts)).
pub fn initialize_stage(sources: &HookSources) -> Option<Stage> {
    let commands = sources.commands(LifecycleHook::InitializeCommand);
    (!commands.is_empty()).then(|| Stage {
        hook: LifecycleHook::InitializeCommand,
        commands: commands.to_vec(),
        condition: RunCondition::Always,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all_hooks() -> Value {
        json!({
            "initializeCommand": "echo init",
            "onCreateCommands": ["echo feature-on-create", "echo on-create"],
            "updateContentCommands": ["echo update"],
            "postCreateCommands": [{"a": "echo a", "b": ["echo", "b"]}],
            "postStartCommands": [["echo", "start"]],
            "postAttachCommands": ["echo attach"],
        })
    }

    fn hooks(stages: &[Stage]) -> Vec<LifecycleHook> {
        stages.iter().map(|s| s.hook).collect()
    }

    fn plan(config: &Value, kind: BringUpKind, options: PlanOptions) -> Plan {
        Plan::from_merged_configuration(config, kind, options).unwrap()
    }

    use LifecycleHook::*;

    #[test]
    fn merged_arrays_keep_source_order_and_index() {
        let sources = HookSources::from_merged_configuration(&json!({
            "postCreateCommands": ["echo feature", "", "echo json"],
        }))
        .unwrap();
        let commands = sources.commands(PostCreateCommand);
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].source, 0);
        assert_eq!(
            commands[0].command,
            HookCommand::Shell("echo feature".into())
        );
        // The empty value is a no-op but keeps the indices of the others.
        assert_eq!(commands[1].source, 2);
        assert_eq!(commands[1].path, "postCreateCommands[2]");
        assert_eq!(commands[1].origin_label(), "`postCreateCommands[2]`");
    }

    #[test]
    fn plain_config_singular_properties_are_one_source() {
        let sources = HookSources::from_merged_configuration(&json!({
            "initializeCommand": ["touch", "x"],
            "postStartCommand": "echo start",
        }))
        .unwrap();
        assert_eq!(
            sources.commands(PostStartCommand)[0].path,
            "postStartCommand"
        );
        let init = initialize_stage(&sources).unwrap();
        assert_eq!(init.condition, RunCondition::Always);
        assert_eq!(init.commands[0].origin_label(), "devcontainer.json");
        assert!(initialize_stage(&HookSources::default()).is_none());
    }

    #[test]
    fn merged_property_that_is_not_an_array_is_an_error() {
        let err =
            HookSources::from_merged_configuration(&json!({"postStartCommands": "x"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`postStartCommands`: expected an array of hook values, found string `x`"
        );
        let err =
            HookSources::from_merged_configuration(&json!({"onCreateCommands": [1]})).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`onCreateCommands[0]`: expected"),
            "{err}"
        );
    }

    #[test]
    fn metadata_entries_give_origins_and_ignore_feature_initialize_command() {
        let entries = [
            json!({"id": "ghcr.io/x/node:1", "postCreateCommand": "echo node", "initializeCommand": "evil"}),
            json!({"remoteUser": "vscode", "postCreateCommand": ""}),
            json!({"id": "./f", "postCreateCommand": false}),
            json!({"postCreateCommand": ["echo", "json"]}),
        ];
        let sources = HookSources::from_metadata(&entries, Some(&json!("echo init"))).unwrap();
        let post_create = sources.commands(PostCreateCommand);
        assert_eq!(post_create.len(), 2);
        assert_eq!(post_create[0].origin_label(), "Feature 'ghcr.io/x/node:1'");
        assert_eq!(post_create[1].origin_label(), "devcontainer.json");
        // Falsy values are left out as in the merged array: source 1, the entry at index 3.
        assert_eq!(post_create[1].source, 1);
        assert_eq!(
            post_create[1].path,
            "devcontainer.metadata[3].postCreateCommand"
        );
        let init = sources.commands(InitializeCommand);
        assert_eq!(init.len(), 1);
        assert_eq!(init[0].command, HookCommand::Shell("echo init".into()));
    }

    #[test]
    fn new_container_runs_all_in_spec_order_split_at_default_wait_for() {
        let p = plan(&all_hooks(), BringUpKind::Created, PlanOptions::default());
        assert_eq!(p.wait_for, UpdateContentCommand);
        assert_eq!(
            hooks(&p.blocking),
            vec![OnCreateCommand, UpdateContentCommand]
        );
        assert_eq!(
            hooks(&p.background),
            vec![PostCreateCommand, PostStartCommand, PostAttachCommand]
        );
        let conditions: Vec<RunCondition> = p.stages().map(|s| s.condition).collect();
        use RunCondition::*;
        assert_eq!(conditions, vec![Due, Due, Due, Due, Always]);
        assert!(p.skipped.is_empty());
        // Sources stay in order: the Feature's command before devcontainer.json's.
        assert_eq!(p.blocking[0].commands.len(), 2);
        assert_eq!(
            p.blocking[0].commands[0].command,
            HookCommand::Shell("echo feature-on-create".into())
        );
    }

    #[test]
    fn restarted_container_is_due_post_start_and_attach_once_hooks_only_retried() {
        let p = plan(&all_hooks(), BringUpKind::Restarted, PlanOptions::default());
        let due: Vec<LifecycleHook> = p
            .stages()
            .filter(|s| s.condition != RunCondition::UnlessMarked)
            .map(|s| s.hook)
            .collect();
        assert_eq!(due, vec![PostStartCommand, PostAttachCommand]);
        let retried: Vec<LifecycleHook> = p
            .stages()
            .filter(|s| s.condition == RunCondition::UnlessMarked)
            .map(|s| s.hook)
            .collect();
        assert_eq!(
            retried,
            vec![OnCreateCommand, UpdateContentCommand, PostCreateCommand]
        );
    }

    #[test]
    fn running_container_is_due_post_attach_only() {
        let p = plan(&all_hooks(), BringUpKind::Running, PlanOptions::default());
        let due: Vec<LifecycleHook> = p
            .stages()
            .filter(|s| s.condition != RunCondition::UnlessMarked)
            .map(|s| s.hook)
            .collect();
        assert_eq!(due, vec![PostAttachCommand]);
        assert_eq!(p.stages().count(), 5);
    }

    #[test]
    fn wait_for_moves_the_split() {
        let mut config = all_hooks();
        config["waitFor"] = json!("postStartCommand");
        let p = plan(&config, BringUpKind::Created, PlanOptions::default());
        assert_eq!(
            hooks(&p.blocking),
            vec![
                OnCreateCommand,
                UpdateContentCommand,
                PostCreateCommand,
                PostStartCommand
            ]
        );
        assert_eq!(hooks(&p.background), vec![PostAttachCommand]);

        config["waitFor"] = json!("initializeCommand");
        let p = plan(&config, BringUpKind::Created, PlanOptions::default());
        assert!(p.blocking.is_empty());
        assert_eq!(p.background.len(), 5);

        config["waitFor"] = json!("postAttachCommand");
        let p = plan(&config, BringUpKind::Created, PlanOptions::default());
        assert_eq!(p.blocking.len(), 5);
    }

    #[test]
    fn wait_for_rejects_unknown_values() {
        assert_eq!(wait_for(&json!({})).unwrap(), UpdateContentCommand);
        assert_eq!(
            wait_for(&json!({"waitFor": null})).unwrap(),
            UpdateContentCommand
        );
        let err = wait_for(&json!({"waitFor": "postCreate"})).unwrap_err();
        assert!(err.to_string().ends_with("found `postCreate`"), "{err}");
        let err = wait_for(&json!({"waitFor": 3})).unwrap_err();
        assert!(err.to_string().ends_with("found number `3`"), "{err}");
    }

    #[test]
    fn skip_non_blocking_commands_drops_hooks_after_wait_for() {
        let options = PlanOptions {
            skip_non_blocking_commands: true,
            ..PlanOptions::default()
        };
        let p = plan(&all_hooks(), BringUpKind::Created, options);
        assert_eq!(
            hooks(&p.blocking),
            vec![OnCreateCommand, UpdateContentCommand]
        );
        assert!(p.background.is_empty());
        assert_eq!(
            p.skipped,
            [PostCreateCommand, PostStartCommand, PostAttachCommand]
                .map(|hook| SkippedHook {
                    hook,
                    reason: SkipReason::Flag("--skip-non-blocking-commands")
                })
                .to_vec()
        );
    }

    #[test]
    fn skip_post_create_runs_no_container_hook() {
        let options = PlanOptions {
            skip_post_create: true,
            ..PlanOptions::default()
        };
        let p = plan(&all_hooks(), BringUpKind::Created, options);
        assert_eq!(p.stages().count(), 0);
        assert_eq!(p.skipped.len(), 5);
        assert!(
            p.skipped
                .iter()
                .all(|s| s.reason == SkipReason::Flag("--skip-post-create"))
        );
    }

    /// `--stop-for-personalization` runs up to `postCreateCommand` and the dotfiles step, then
    /// stops (the reference CLI's `runLifecycleHooks` order).
    #[test]
    fn stop_for_personalization_stops_after_post_create_and_still_personalizes() {
        let options = PlanOptions {
            stop_for_personalization: true,
            ..PlanOptions::default()
        };
        let plan = plan(&all_hooks(), BringUpKind::Created, options);
        assert_eq!(
            hooks(&plan.stages().cloned().collect::<Vec<_>>()),
            vec![OnCreateCommand, UpdateContentCommand, PostCreateCommand]
        );
        for hook in [PostStartCommand, PostAttachCommand] {
            assert!(
                plan.skipped.contains(&SkippedHook {
                    hook,
                    reason: SkipReason::Flag("--stop-for-personalization")
                }),
                "{:?}",
                plan.skipped
            );
        }
        assert!(options.personalizes(UpdateContentCommand));
    }

    #[test]
    fn skip_post_attach_drops_only_post_attach() {
        let options = PlanOptions {
            skip_post_attach: true,
            ..PlanOptions::default()
        };
        let p = plan(&all_hooks(), BringUpKind::Running, options);
        assert_eq!(
            hooks(&p.stages().cloned().collect::<Vec<_>>()),
            vec![
                OnCreateCommand,
                UpdateContentCommand,
                PostCreateCommand,
                PostStartCommand
            ]
        );
        assert_eq!(
            p.skipped,
            vec![SkippedHook {
                hook: PostAttachCommand,
                reason: SkipReason::Flag("--skip-post-attach")
            }]
        );
    }

    #[test]
    fn prebuild_forces_update_content_and_stops_after_it() {
        let options = PlanOptions {
            prebuild: true,
            skip_non_blocking_commands: true,
            ..PlanOptions::default()
        };
        let mut config = all_hooks();
        config["waitFor"] = json!("onCreateCommand");
        let p = plan(&config, BringUpKind::Running, options);
        assert_eq!(
            hooks(&p.blocking),
            vec![OnCreateCommand, UpdateContentCommand]
        );
        assert_eq!(p.blocking[0].condition, RunCondition::UnlessMarked);
        assert_eq!(p.blocking[1].condition, RunCondition::Due);
        assert!(p.background.is_empty());
        assert!(
            p.skipped
                .iter()
                .all(|s| s.reason == SkipReason::Flag("--prebuild"))
        );
        assert_eq!(p.skipped.len(), 3);
    }

    #[test]
    fn dotfiles_follow_post_create_unless_a_flag_stops_before_it() {
        let none = PlanOptions::default();
        assert!(none.personalizes(UpdateContentCommand));
        let skip_non_blocking = PlanOptions {
            skip_non_blocking_commands: true,
            ..none
        };
        assert!(!skip_non_blocking.personalizes(UpdateContentCommand));
        assert!(!skip_non_blocking.personalizes(PostCreateCommand));
        assert!(skip_non_blocking.personalizes(PostStartCommand));
        for flags in [
            PlanOptions {
                skip_post_create: true,
                ..none
            },
            PlanOptions {
                prebuild: true,
                ..none
            },
        ] {
            assert!(!flags.personalizes(PostAttachCommand), "{flags:?}");
        }
    }

    #[test]
    fn unconfigured_hooks_are_listed_as_skipped() {
        let p = plan(
            &json!({"postStartCommands": ["echo x"], "postAttachCommands": ["", []]}),
            BringUpKind::Created,
            PlanOptions::default(),
        );
        assert_eq!(hooks(&p.background), vec![PostStartCommand]);
        assert_eq!(
            p.skipped.iter().map(|s| s.hook).collect::<Vec<_>>(),
            vec![
                OnCreateCommand,
                UpdateContentCommand,
                PostCreateCommand,
                PostAttachCommand
            ]
        );
        assert!(
            p.skipped
                .iter()
                .all(|s| s.reason == SkipReason::NotConfigured)
        );
    }
}
