//! `build.options` (extra `docker build` flags in devcontainer.json) mapped onto a
//! [`BuildRequest`]. Pure.
//!
//! Spec: [`build.options`](https://containers.dev/implementors/json_reference/#image-specific).
//! The reference CLI appends them to `docker build` verbatim; devcell maps the flags the
//! engine's build API has and refuses any other, naming it (spec-note 0093).

use super::error::{EngineError, Result};
use super::spec::BuildRequest;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flag {
    BuildArg,
    Target,
    CacheFrom,
    Label,
    NoCache,
    Pull,
    Tag,
    Network,
    Platform,
    Progress,
    Quiet,
}

impl Flag {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "--build-arg" => Flag::BuildArg,
            "--target" => Flag::Target,
            "--cache-from" => Flag::CacheFrom,
            "--label" => Flag::Label,
            "--no-cache" => Flag::NoCache,
            "--pull" => Flag::Pull,
            "--tag" | "-t" => Flag::Tag,
            "--network" => Flag::Network,
            "--platform" => Flag::Platform,
            "--progress" => Flag::Progress,
            "--quiet" | "-q" => Flag::Quiet,
            _ => return None,
        })
    }

    fn is_bool(self) -> bool {
        matches!(self, Flag::NoCache | Flag::Pull | Flag::Quiet)
    }
}

/// Applies `build.options` to `request`: `--build-arg K=V` (a bare `K` takes devcell's own
/// environment value via `host_env`, as `docker build` does; unset → skipped), `--target`,
/// `--cache-from`, `--label K=V`, `--no-cache`, `--pull`, `-t/--tag`, `--network`,
/// `--platform`; `--progress` and `-q/--quiet` are accepted and ignored (they only change how
/// the docker CLI prints). `--flag value` and `--flag=value` forms.
///
/// Errors: [`EngineError::UnsupportedBuildOption`] naming any other flag (`--secret`, `--ssh`,
/// `--output`, `--cache-to`, …) or a bare word; [`EngineError::InvalidBuildOption`] for a missing
/// or malformed value.
pub fn apply_build_options(
    request: &mut BuildRequest,
    options: &[String],
    host_env: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let mut i = 0;
    while i < options.len() {
        let arg = &options[i];
        i += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let Some(flag) = Flag::parse(name) else {
            return Err(EngineError::UnsupportedBuildOption {
                flag: name.to_string(),
            });
        };
        let invalid = |message: String| EngineError::InvalidBuildOption {
            flag: name.to_string(),
            message,
        };
        if flag.is_bool() {
            let on = match inline.as_deref() {
                None | Some("true") | Some("1") => true,
                Some("false") | Some("0") => false,
                Some(v) => return Err(invalid(format!("expected `true` or `false`, found `{v}`"))),
            };
            match flag {
                Flag::NoCache => request.no_cache = on,
                Flag::Pull => request.pull = on,
                _ => {}
            }
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => {
                let v = options
                    .get(i)
                    .ok_or_else(|| invalid("a value is required".to_string()))?;
                i += 1;
                v.clone()
            }
        };
        if value.is_empty() && flag != Flag::BuildArg {
            return Err(invalid("the value is empty".to_string()));
        }
        match flag {
            Flag::BuildArg => match value.split_once('=') {
                _ if value.is_empty() || value.starts_with('=') => {
                    return Err(invalid(format!("expected `NAME=value`, found `{value}`")));
                }
                Some((k, v)) => {
                    request.args.insert(k.to_string(), v.to_string());
                }
                None => {
                    if let Some(v) = host_env(&value) {
                        request.args.insert(value, v);
                    }
                }
            },
            Flag::Target => request.target = Some(value),
            Flag::CacheFrom => request.cache_from.push(value),
            Flag::Label => {
                let (k, v) = value.split_once('=').unwrap_or((&value, ""));
                request.labels.insert(k.to_string(), v.to_string());
            }
            Flag::Tag => request.tags.push(value),
            Flag::Network => request.network = Some(value),
            Flag::Platform => request.platform = Some(value),
            Flag::Progress | Flag::Quiet | Flag::NoCache | Flag::Pull => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(a: &[&str]) -> Result<BuildRequest> {
        let mut r = BuildRequest::default();
        let a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        apply_build_options(&mut r, &a, &|k| (k == "HOSTARG").then(|| "h".to_string()))?;
        Ok(r)
    }

    #[test]
    fn maps_the_supported_flags_in_both_forms() {
        let r = map(&[
            "--build-arg",
            "A=1",
            "--build-arg=B=2",
            "--build-arg",
            "HOSTARG",
            "--build-arg=UNSET",
            "--target=dev",
            "--cache-from",
            "ghcr.io/x/cache:1",
            "--label",
            "k=v",
            "--no-cache",
            "--pull=true",
            "-t",
            "extra:1",
            "--network=host",
            "--platform",
            "linux/amd64",
            "--progress=plain",
            "-q",
        ])
        .unwrap();
        let args: Vec<_> = r.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(args, ["A=1", "B=2", "HOSTARG=h"]);
        assert_eq!(r.target.as_deref(), Some("dev"));
        assert_eq!(r.cache_from, ["ghcr.io/x/cache:1"]);
        assert_eq!(r.labels["k"], "v");
        assert!(r.no_cache && r.pull);
        assert_eq!(r.tags, ["extra:1"]);
        assert_eq!(r.network.as_deref(), Some("host"));
        assert_eq!(r.platform.as_deref(), Some("linux/amd64"));
    }

    #[test]
    fn unsupported_flags_are_named() {
        for (a, named) in [
            (vec!["--secret", "id=x"], "--secret"),
            (vec!["--ssh=default"], "--ssh"),
            (vec!["--output", "type=local"], "--output"),
            (vec!["context-dir"], "context-dir"),
        ] {
            let err = map(&a).unwrap_err();
            assert!(
                matches!(err, EngineError::UnsupportedBuildOption { .. }),
                "{err}"
            );
            assert!(err.to_string().contains(&format!("`{named}`")), "{err}");
        }
    }

    #[test]
    fn bad_values_are_errors() {
        for a in [
            vec!["--target"],
            vec!["--build-arg", "=x"],
            vec!["--no-cache=maybe"],
            vec!["--tag="],
        ] {
            assert!(map(&a).is_err(), "{a:?}");
        }
    }
}
