//! The personalization step of a bring-up: the user's dotfiles repository
//! (`--dotfiles-repository`, `--dotfiles-install-command`, `--dotfiles-target-path`), cloned
//! **inside** the container as the hooks' user and installed once, after `postCreateCommand`
//! and before `postStartCommand`, as the reference CLI does (spec-note 0645).
//!
//! The repository, the target path and the install command come from the user's command line,
//! never from the configuration. They reach the container's shell as environment variables,
//! never as script text, so no value is parsed as shell syntax; `git clone` gets `--` before
//! them. A failed install does not fail the bring-up (as in the reference): it is reported in
//! [`DotfilesRun`] and runs again at the next bring-up, as its marker is written only after
//! success (as devcell's hook markers, spec-note 0101).

use std::time::Instant;

use super::error::{LifecycleError, Result};
use super::executor::{ExecRequest, HookEnv, HookExecutor};
use super::hook::SimpleCommand;
use super::hook_name::LifecycleHook;
use super::plan::{Plan, Stage};
use super::report::LifecycleReport;
use super::runner::{HookContext, TailReporter, run_all};
use crate::diagnostics::SecretMask;
use crate::progress::{Event, Reporter};

/// The reference CLI's default `--dotfiles-target-path`.
pub const DEFAULT_TARGET_PATH: &str = "~/dotfiles";

/// The install scripts tried, in order, when no `--dotfiles-install-command` is given (the
/// reference CLI's list).
pub const INSTALL_CANDIDATES: [&str; 8] = [
    "install.sh",
    "install",
    "bootstrap.sh",
    "bootstrap",
    "script/bootstrap",
    "setup.sh",
    "setup",
    "script/setup",
];

/// The marker recording that the dotfiles were installed, relative to the user's home: the
/// reference CLI's file in its default container data folder.
pub const MARKER: &str = ".devcontainer/.dotfilesMarker";

/// The user's dotfiles request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dotfiles {
    /// `--dotfiles-repository` as given: a URL, `owner/repo` (a GitHub repository, as the
    /// reference takes it) or a path inside the container.
    pub repository: String,
    /// `--dotfiles-install-command`: a file of the repository (or a path) to run instead of
    /// the first of [`INSTALL_CANDIDATES`].
    pub install_command: Option<String>,
    /// `--dotfiles-target-path` (default [`DEFAULT_TARGET_PATH`]): `~` and relative paths
    /// are under the user's home.
    pub target_path: String,
    /// The repository the user named, when devcell exported it on the host and `repository`
    /// is now where the export is bound in the container (`up` under network `none`,
    /// spec-note 0670) or copied into it (`set-up`, `run-user-commands`, spec-note 0685):
    /// what the result shows.
    pub exported_from: Option<String>,
}

/// The URL `repository` shown without its credentials, when it carries any: an `http(s)` or
/// `ftp(s)` URL with userinfo (a token alone may be the user name), or any `scheme://` URL
/// whose userinfo has a password (`ssh://git@host/…` and `git@host:…` name a user only).
fn credentials_in(repository: &str) -> Option<String> {
    let (scheme, userinfo, _) = split_userinfo(repository)?;
    let web = matches!(
        scheme.to_ascii_lowercase().as_str(),
        "http" | "https" | "ftp" | "ftps"
    );
    (web || userinfo.contains(':')).then(|| masked(repository))
}

/// `(scheme, userinfo, host and path)` of a `scheme://userinfo@host/…` URL; `None` without
/// userinfo. The split is [`crate::config::hostgit::without_credentials`]'s.
fn split_userinfo(url: &str) -> Option<(&str, &str, String)> {
    let stripped = crate::config::hostgit::without_credentials(url);
    let (scheme, rest) = url.split_once("://")?;
    let (_, host_and_path) = stripped.split_once("://")?;
    let userinfo_len = rest.len().checked_sub(host_and_path.len() + 1)?;
    let host_and_path = host_and_path.to_string();
    Some((scheme, &rest[..userinfo_len], host_and_path))
}

/// `url` with its userinfo shown as `***` (`https://user:token@host/…` → `https://***@host/…`);
/// unchanged without userinfo.
pub(crate) fn masked(url: &str) -> String {
    match split_userinfo(url) {
        Some((scheme, _, host_and_path)) => format!("{scheme}://***@{host_and_path}"),
        None => url.to_string(),
    }
}

impl Dotfiles {
    /// The request of the three flags; `None` without a repository (the other two then
    /// change nothing, as in the reference). An empty repository, install command or target
    /// path is an error naming the flag.
    pub fn from_flags(
        repository: Option<&str>,
        install_command: Option<&str>,
        target_path: Option<&str>,
    ) -> std::result::Result<Option<Dotfiles>, String> {
        let Some(repository) = repository else {
            return Ok(None);
        };
        for (flag, value) in [
            ("--dotfiles-repository", Some(repository)),
            ("--dotfiles-install-command", install_command),
            ("--dotfiles-target-path", target_path),
        ] {
            if value.is_some_and(|v| v.trim().is_empty()) {
                return Err(format!("`{flag}` is empty"));
            }
        }
        if let Some(shown) = credentials_in(repository) {
            return Err(format!(
                "`--dotfiles-repository` carries credentials (`{shown}`): the clone runs inside the container with the `git` the repository's image provides, which would be handed the token (and could print or send it); devcell refuses it (spec-note 0645)"
            ));
        }
        Ok(Some(Dotfiles {
            repository: repository.to_string(),
            install_command: install_command.map(str::to_string),
            target_path: target_path.unwrap_or(DEFAULT_TARGET_PATH).to_string(),
            exported_from: None,
        }))
    }

    /// What `git clone` is given: `owner/repo` (no `:`, not starting with `/`, `./` or
    /// `../`) is `https://github.com/owner/repo.git`, as in the reference; anything else is
    /// kept.
    pub fn clone_source(&self) -> String {
        let r = &self.repository;
        let is_path = r.starts_with('/') || r.starts_with("./") || r.starts_with("../");
        if r.contains(':') || is_path {
            r.clone()
        } else {
            format!("https://github.com/{r}.git")
        }
    }

    /// The repository as reported: [`Self::exported_from`](Dotfiles::exported_from), else
    /// [`Self::clone_source`], without a password or token a URL
    /// may carry (`https://user:token@host/…` → `https://***@host/…`).
    pub fn shown_source(&self) -> String {
        masked(
            self.exported_from
                .as_deref()
                .unwrap_or(&self.clone_source()),
        )
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (REPOSITORY_ENV.to_string(), self.clone_source()),
            (TARGET_ENV.to_string(), self.target_path.clone()),
        ];
        if let Some(install) = &self.install_command {
            env.push((INSTALL_ENV.to_string(), install.clone()));
        }
        env
    }
}

const REPOSITORY_ENV: &str = "DEVCELL_DOTFILES_REPOSITORY";
const TARGET_ENV: &str = "DEVCELL_DOTFILES_TARGET";
const INSTALL_ENV: &str = "DEVCELL_DOTFILES_INSTALL";

/// Exits 0 when the marker is present (the dotfiles were installed in this home), 1 when not.
pub const MARKED_SCRIPT: &str = r#"test -f "$HOME/.devcontainer/.dotfilesMarker""#;

/// Clones (unless the target exists) and installs; writes the marker after success. Every
/// value comes from the environment. Without an install script the repository's dot-files are
/// linked into the home, as the reference does.
pub const INSTALL_SCRIPT: &str = r#"target="$DEVCELL_DOTFILES_TARGET"
case "$target" in
  "~") target="$HOME" ;;
  "~/"*) target="$HOME/${target#"~/"}" ;;
  /*) ;;
  *) target="$HOME/$target" ;;
esac
if ! command -v git >/dev/null 2>&1; then
  echo "git not found in the container: cannot clone the dotfiles repository" >&2
  exit 127
fi
if [ ! -e "$target" ]; then
  git clone --depth 1 -- "$DEVCELL_DOTFILES_REPOSITORY" "$target" || exit $?
fi
echo "Setting current directory to '$target'"
cd "$target" || exit $?
run=
if [ -n "${DEVCELL_DOTFILES_INSTALL-}" ]; then
  install="$DEVCELL_DOTFILES_INSTALL"
  if [ -f "./$install" ]; then
    run="./$install"
  elif [ -f "$install" ]; then
    run="$install"
  else
    echo "Could not locate '$install'..." >&2
    exit 126
  fi
else
  for f in install.sh install bootstrap.sh bootstrap script/bootstrap setup.sh setup script/setup; do
    if [ -e "$f" ]; then
      run="./$f"
      break
    fi
  done
fi
if [ -n "$run" ]; then
  if [ ! -x "$run" ]; then
    echo "Setting '$run' as executable"
    chmod +x "$run" || exit $?
  fi
  echo "Executing command '$run'..."
  "$run" || exit $?
else
  linked=
  for f in "$target"/.[!.]* "$target"/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ "${f##*/}" = .git ] && continue
    ln -sf "$f" "$HOME/" && linked="$linked ${f##*/}"
  done
  if [ -n "$linked" ]; then
    echo "Linked dotfiles:$linked"
  else
    echo "No dotfiles found."
  fi
fi
mkdir -p "$HOME/.devcontainer" && : > "$HOME/.devcontainer/.dotfilesMarker"
"#;

pub use super::report::{DotfilesOutcome, DotfilesRun};

/// Runs a whole plan as [`run_plan`](super::run_plan) does, with the user's dotfiles installed
/// ([`install_dotfiles`]) after `postCreateCommand` and before `postStartCommand`, as the
/// reference CLI's personalization step. The caller passes `dotfiles` only when the plan's
/// flags let the bring-up reach that step ([`PlanOptions::personalizes`](super::PlanOptions::personalizes)).
/// A failed install is in the report's `dotfiles`, not an error.
///
/// Errors: as [`run_stages`](super::run_stages).
pub async fn run_plan_with_dotfiles<E: HookExecutor>(
    executor: &E,
    plan: &Plan,
    context: &HookContext,
    dotfiles: Option<&Dotfiles>,
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let stages: Vec<Stage> = plan.stages().cloned().collect();
    let Some(dotfiles) = dotfiles else {
        return run_all(executor, &plan.skipped, &stages, context, reporter).await;
    };
    let (early, late): (Vec<Stage>, Vec<Stage>) = stages
        .into_iter()
        .partition(|s| s.hook <= LifecycleHook::PostCreateCommand);
    let mut report = run_all(executor, &plan.skipped, &early, context, reporter).await?;
    report.dotfiles = Some(install_dotfiles(executor, dotfiles, context, reporter).await?);
    match run_all(executor, &[], &late, context, reporter).await {
        Ok(rest) => {
            report.extend(rest);
            Ok(report)
        }
        Err(LifecycleError::HookFailed(mut failure)) => {
            let rest = std::mem::take(&mut failure.report);
            report.extend(rest);
            failure.report = report;
            Err(LifecycleError::HookFailed(failure))
        }
        Err(other) => Err(other),
    }
}

/// Runs the dotfiles step as `context`'s user, in their home, with the hooks' environment
/// and secrets (through the process environment): the marker is checked first (one process);
/// when absent, the repository is cloned and installed ([`INSTALL_SCRIPT`]), its output
/// streamed to `reporter`.
///
/// Errors: [`LifecycleError::Executor`] when the executor cannot run a process at all; a
/// failing clone or install is [`DotfilesOutcome::Failed`], not an error.
pub async fn install_dotfiles<E: HookExecutor>(
    executor: &E,
    dotfiles: &Dotfiles,
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<DotfilesRun> {
    let executor_error = |source| LifecycleError::Executor {
        what: "the dotfiles step".to_string(),
        source,
    };
    // The hooks' environment (its `HOME` among them) for both processes; the secrets only
    // for the install.
    let mut env = context.env.clone();
    env.0.extend(context.secrets.0.clone());
    env.0.extend(dotfiles.env());
    let request = |script: &str, env: HookEnv| ExecRequest {
        argv: SimpleCommand::Shell(script.to_string()).argv(),
        user: context.user.clone(),
        working_dir: None,
        env,
    };
    let mut run = DotfilesRun {
        repository: dotfiles.shown_source(),
        target_path: dotfiles.target_path.clone(),
        outcome: DotfilesOutcome::AlreadyInstalled,
        exit_code: None,
        output_tail: Vec::new(),
    };
    let quiet = crate::progress::NoopReporter;
    let marked = executor
        .exec(&request(MARKED_SCRIPT, context.env.clone()), &quiet)
        .await
        .map_err(executor_error)?;
    if marked == 0 {
        reporter.report(Event::Status(
            "Dotfiles already installed in this container (marker found)".to_string(),
        ));
        return Ok(run);
    }
    reporter.report(Event::Status(format!(
        "Installing dotfiles from {}...",
        run.repository
    )));
    let mask = SecretMask::new(context.secrets.0.values());
    let output = TailReporter::new(reporter, None, &mask);
    let started = Instant::now();
    let code = executor
        .exec(&request(INSTALL_SCRIPT, env), &output)
        .await
        .map_err(executor_error)?;
    run.exit_code = Some(code);
    if code == 0 {
        run.outcome = DotfilesOutcome::Installed;
        reporter.report(Event::Status(format!(
            "Installed dotfiles in {} ms",
            started.elapsed().as_millis()
        )));
    } else {
        run.outcome = DotfilesOutcome::Failed;
        run.output_tail = output.into_tail();
        reporter.report(Event::Status(format!(
            "warning: installing dotfiles failed with exit code {code}; the bring-up goes on, and they are tried again next time"
        )));
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::plan::BringUpKind;
    use crate::lifecycle::runner::tests::{Lines, Recorder, all_hooks, context, plan};

    fn request(repository: &str) -> Dotfiles {
        Dotfiles::from_flags(Some(repository), None, None)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn owner_repo_is_a_github_repository_and_everything_else_is_kept() {
        assert_eq!(
            request("me/dots").clone_source(),
            "https://github.com/me/dots.git"
        );
        for kept in [
            "https://example.com/me/dots.git",
            "git@example.com:me/dots.git",
            "/srv/dots.git",
            "./dots",
            "../dots",
            "file:///srv/dots.git",
        ] {
            assert_eq!(request(kept).clone_source(), kept);
        }
    }

    #[test]
    fn flags_without_a_repository_change_nothing_and_empty_values_are_errors() {
        assert_eq!(
            Dotfiles::from_flags(None, Some("x.sh"), Some("/p")).unwrap(),
            None
        );
        let d = Dotfiles::from_flags(Some("/r"), Some("x.sh"), Some("/p"))
            .unwrap()
            .unwrap();
        assert_eq!(d.install_command.as_deref(), Some("x.sh"));
        assert_eq!(d.target_path, "/p");
        assert_eq!(request("/r").target_path, DEFAULT_TARGET_PATH);
        let err = Dotfiles::from_flags(Some("/r"), Some(" "), None).unwrap_err();
        assert!(err.contains("--dotfiles-install-command"), "{err}");
        assert!(Dotfiles::from_flags(Some(""), None, None).is_err());
    }

    /// Attack H2: a token in the URL would reach the image's `git` (which the repository
    /// chooses) and, printed back, the host's output: refused before anything runs, the
    /// error not naming it; a user name alone over SSH is kept.
    #[test]
    fn a_url_with_credentials_is_refused_and_the_token_never_named() {
        for url in [
            "https://me:tok3n@example.com/me/dots.git",
            "https://tok3n@example.com/me/dots.git",
            "HTTP://me:tok3n@example.com/me/dots.git",
            "ssh://me:tok3n@example.com/me/dots.git",
        ] {
            let err = Dotfiles::from_flags(Some(url), None, None).unwrap_err();
            assert!(err.contains("carries credentials"), "{err}");
            assert!(!err.contains("tok3n"), "{err}");
        }
        for kept in [
            "ssh://git@example.com/me/dots.git",
            "git@example.com:me/dots.git",
            "https://example.com/a@b/dots.git",
        ] {
            assert_eq!(request(kept).clone_source(), kept);
        }
    }

    #[test]
    fn a_token_in_the_url_is_not_shown() {
        let with_user = Dotfiles {
            repository: "https://me:tok3n@example.com/me/dots.git".into(),
            install_command: None,
            target_path: DEFAULT_TARGET_PATH.into(),
            exported_from: None,
        };
        assert_eq!(
            with_user.shown_source(),
            "https://***@example.com/me/dots.git"
        );
        assert_eq!(
            request("https://example.com/a@b/dots.git").shown_source(),
            "https://example.com/a@b/dots.git"
        );
        assert_eq!(
            request("git@example.com:me/dots.git").shown_source(),
            "git@example.com:me/dots.git"
        );
    }

    #[test]
    fn the_scripts_take_every_value_from_the_environment() {
        // The values never become script text: the scripts are constants.
        for name in [REPOSITORY_ENV, TARGET_ENV, INSTALL_ENV] {
            assert!(
                INSTALL_SCRIPT.contains(&format!("${name}"))
                    || INSTALL_SCRIPT.contains(&format!("${{{name}")),
                "{name}"
            );
        }
        assert!(INSTALL_SCRIPT.contains("git clone --depth 1 -- "));
        assert!(INSTALL_SCRIPT.contains(&INSTALL_CANDIDATES.join(" ")));
        assert!(INSTALL_SCRIPT.contains(MARKER) && MARKED_SCRIPT.contains(MARKER));
    }

    #[tokio::test]
    async fn dotfiles_are_installed_after_post_create_and_before_post_start() {
        let recorder = Recorder::answering([
            (MARKED_SCRIPT, ("dotfiles marked?", 1)),
            (INSTALL_SCRIPT, ("dotfiles install", 0)),
        ]);
        let dotfiles = Dotfiles::from_flags(Some("/dots.git"), None, None)
            .unwrap()
            .unwrap();
        let report = run_plan_with_dotfiles(
            &recorder,
            &plan(all_hooks(), BringUpKind::Created),
            &context(),
            Some(&dotfiles),
            &Lines::default(),
        )
        .await
        .unwrap();
        let events: Vec<String> = recorder
            .events()
            .into_iter()
            .filter(|e| !e.starts_with("end ") && !e.starts_with("mark "))
            .collect();
        let at = |name: &str| events.iter().position(|e| e == name).unwrap();
        assert!(
            at("start post-create") < at("dotfiles marked?"),
            "{events:?}"
        );
        assert!(
            at("dotfiles marked?") < at("dotfiles install"),
            "{events:?}"
        );
        assert!(
            at("dotfiles install") < at("start post-start"),
            "{events:?}"
        );
        let run = report.dotfiles.expect("the dotfiles step is reported");
        assert_eq!(run.outcome, DotfilesOutcome::Installed);
        // The repository, never script text, reaches the install through its environment.
        let requests = recorder.requests.lock().unwrap();
        let install = requests
            .iter()
            .find(|r| r.argv.last().map(String::as_str) == Some(INSTALL_SCRIPT))
            .unwrap();
        assert_eq!(install.env.0["DEVCELL_DOTFILES_REPOSITORY"], "/dots.git");
        assert_eq!(install.user, context().user);
    }
}
