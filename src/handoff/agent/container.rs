//! The handoff's workspace container: brought up with the judgement made before the session,
//! what it really is recorded in the session (its image, its network, its environment
//! record), and the context file and `AGENTS.md` written for the agent in it.

use super::{Handoff, Judged, Live, Recorded, Written};
use crate::handoff::agents_md;
use crate::handoff::context::{self, ContextInputs, FeatureInfo, HandoffContext, ImageInfo, Task};
use crate::handoff::plan::{Prepared, ctx_rel_path};
use crate::handoff::session::{StopSignal, agents_md_report, unless_stopped};
use crate::handoff::state::SessionFact;
use crate::ops::error::Result;
use crate::ops::up::up_judged;
use crate::ops::{UpOptions, UpResult};
use crate::progress::Event;
use crate::settings::NetworkMode;

impl Handoff<'_> {
    /// `up`, with the hardened profile and the handoff's mounts, going on from `judged`.
    pub(super) async fn bring_up(
        &self,
        up_opts: &UpOptions,
        p: &Prepared,
        judged: Judged,
        live: &Live,
        stop: &mut StopSignal<'_>,
    ) -> Result<UpResult> {
        let verb = match p.plan.container.action.as_str() {
            "reuse" => "reusing the running",
            "start" => "starting the stopped",
            _ => "creating the",
        };
        self.reporter.report(Event::Status(format!(
            "{verb} workspace container ({} profile, network {})",
            p.profile, p.network
        )));
        // a host dotfiles folder's committed HEAD, there for `up`'s install only (attack L10)
        let (_dotfiles, warning) = crate::handoff::dotfiles::stage(p.dotfiles.as_ref());
        if let Some(w) = warning {
            self.reporter.report(Event::Status(format!("warning: {w}")));
        }
        unless_stopped(stop, async {
            match judged {
                Judged::Single(judged) => {
                    up_judged(self.engine, up_opts, *judged, self.reporter).await
                }
                // `up_compose` takes the lock and judges every service with the git directories
                Judged::Compose(choice) => {
                    crate::ops::compose_up::up_compose(
                        self.engine,
                        up_opts,
                        *choice,
                        &p.git_requests,
                        self.reporter,
                    )
                    .await
                }
            }
        })
        .await
        .map_err(|signal| live.signaled(signal))?
        .map_err(|e| live.fail(e))
    }

    /// The container as it came up, recorded in the session: its image, the network it really
    /// has (a reused container keeps the one it was created with; a different one than asked
    /// is warned about), and the handoff's environment record.
    pub(super) async fn record_container(
        &self,
        up_opts: &UpOptions,
        p: &Prepared,
        up: &UpResult,
        compose: bool,
        live: &mut Live,
    ) -> Result<Recorded> {
        let info = self
            .engine
            .inspect_container(&up.container_id)
            .await
            .ok()
            .flatten();
        let image = info.as_ref().map(|c| c.image.clone()).unwrap_or_default();
        // A reused container keeps the network it was created with: report the real one.
        let network = match info.as_ref().map(|c| c.host.network_mode.as_str()) {
            Some("none") if up.egress.is_some() => NetworkMode::Allowlist,
            Some("none") => NetworkMode::None,
            Some(_) => NetworkMode::Default,
            None => p.network,
        };
        let network = if compose {
            // the mode the primary container was created with (its label)
            let created = info.as_ref().map_or(
                crate::ops::compose_network::ComposeNetwork::of(p.network),
                |c| crate::ops::compose_network::ComposeNetwork::of_labels(&c.labels),
            );
            live.warnings.push(created.note().to_string());
            created.mode()
        } else {
            network
        };
        if network != p.network {
            let message = format!(
                "the existing container {} uses network `{network}`, not the requested `{}`; run `devcell delete` and hand off again to change it",
                &up.container_id[..up.container_id.len().min(12)],
                p.network
            );
            self.reporter
                .report(Event::Status(format!("warning: {message}")));
            live.warnings.push(message);
        }
        live.store
            .set_container(&live.root, Some(&live.id), &up.container_id, Some(&image))
            .map_err(|e| live.fail(e.into()))?;
        if let Some(joined) = self.group {
            joined.set_container(&up.container_id);
        }
        live.record(SessionFact::Network(network.as_str().to_string()))
            .map_err(|e| live.fail(e.into()))?;
        let environments = crate::ops::environment::EnvironmentStore::new(live.store.root());
        let environment = record_environment(
            self.engine,
            up_opts,
            up,
            network.as_str(),
            &live.root,
            &environments,
        )
        .await;
        match environment {
            Ok(hash) => {
                live.record(SessionFact::Environment(hash.clone()))
                    .map_err(|e| live.fail(e.into()))?;
                let differs = crate::handoff::environment::outcome(self.opts, &environments, &hash);
                live.warnings.extend(differs);
            }
            // `env show` then says there is none; the handoff goes on unchanged
            Err(message) => tracing::debug!("{message}"),
        }
        Ok(Recorded {
            info,
            image,
            network,
        })
    }

    /// The agent's context file relative to the workspace root: `[handoff] context_path`, or a
    /// group member's own ([`context::member_path`], spec-note 0161).
    pub(super) fn context_rel_path(&self, session: &str) -> String {
        let configured = ctx_rel_path(&self.opts.settings);
        match self.group {
            Some(_) => context::member_path(&configured, session),
            None => configured,
        }
    }

    /// The context file, then `AGENTS.md` (when absent), in the workspace root.
    pub(super) async fn write_context_files(
        &self,
        p: &Prepared,
        up: &UpResult,
        recorded: &Recorded,
        live: &Live,
    ) -> Result<Written> {
        let opts = self.opts;
        let digest = self
            .engine
            .inspect_image(&recorded.image)
            .await
            .ok()
            .flatten()
            .and_then(|i| i.repo_digests.first().cloned())
            .and_then(|d| d.split_once('@').map(|(_, d)| d.to_string()));
        let mut inputs = ContextInputs::from_settings(&opts.settings, &opts.agent, &opts.verify)
            .unwrap_or_default();
        inputs.task = Task::new(opts.task_url.clone(), opts.task_title.clone());
        if let Some(provider) = &opts.task_provider {
            inputs.task.provider = Some(provider.clone());
        }
        inputs.security.profile = up.profile.clone();
        inputs.security.network = recorded.network.to_string();
        inputs.security.permissions = p.plan.grants.clone();
        inputs.secrets = p.plan.secrets.clone();
        inputs.env = p.plan.env.clone();
        // The digests the container's Features were installed at (its label, written by `up`
        // from the resolution, which the lockfile pins), else the digest pinned in the
        // reference.
        let installed = recorded
            .info
            .as_ref()
            .and_then(|c| crate::security::audit::feature_digests(&c.labels))
            .unwrap_or_default();
        inputs.image = ImageInfo {
            reference: recorded.image.clone(),
            digest,
            features: p
                .plan
                .features
                .iter()
                .map(|id| FeatureInfo {
                    id: id.clone(),
                    digest: crate::features::FeatureRef::parse(id)
                        .ok()
                        .and_then(|r| installed.get(&r.lock_key()).cloned())
                        .or_else(|| id.split_once('@').map(|(_, d)| d.to_string())),
                })
                .collect(),
        };
        inputs.hooks = context::hooks_from_report(&up.lifecycle);
        let rel_path = self.context_rel_path(&live.id);
        inputs.context_path = rel_path.clone();
        let mut ctx = HandoffContext::new(&p.workspace, inputs);
        ctx.sandbox = opts.sandbox.clone();
        ctx.mail = opts
            .mail
            .as_ref()
            .map(crate::handoff::mail_worktree::context_mail);
        let context_file =
            context::write(&live.root, &rel_path, &ctx).map_err(|e| live.fail(e.into()))?;
        // the members of a group share `AGENTS.md`: it names the variable, each its own file
        let shared = self.group.map(|_| HandoffContext {
            context_path: format!("${}", context::CONTEXT_VARIABLE),
            ..ctx.clone()
        });
        let agents_md = agents_md_report(
            agents_md::write_if_absent(&live.root, shared.as_ref().unwrap_or(&ctx))
                .map_err(|e| live.fail(e.into()))?,
        );
        Ok(Written {
            context_file,
            agents_md,
        })
    }
}

/// The handoff's environment record (spec-note 0520), kept under `<state>/environments/` as the
/// workspace root's last record; returns its hash, or the warning saying why there is none.
async fn record_environment(
    engine: &dyn crate::engine::Engine,
    up_opts: &crate::ops::UpOptions,
    up: &crate::ops::UpResult,
    network: &str,
    root: &std::path::Path,
    store: &crate::ops::environment::EnvironmentStore,
) -> Result<String, String> {
    use crate::ops::environment::{record_up, security_record};
    let mut security = security_record(&up.profile, &up_opts.security, &up_opts.settings);
    // the network the container really has (a reused one keeps its own)
    security.network = network.to_string();
    let record = record_up(engine, "handoff", security, up)
        .await
        .map_err(|e| format!("no environment record: {e}"))?;
    store
        .store(root, &record)
        .map_err(|e| format!("the environment record was not kept: {e}"))
}
