//! The Compose project name of a Compose configuration, by the reference CLI's rule
//! (spec-note 0600): the project devcell brings up is the one the reference CLI would, so
//! each finds the other's containers.

use std::path::Path;

use crate::config::workspace::normalize_lexically;

/// What [`project_name`] decides from.
#[derive(Debug, Clone, Copy)]
pub struct ProjectNameInputs<'a> {
    /// `COMPOSE_PROJECT_NAME` in devcell's environment, if set.
    pub env: Option<&'a str>,
    /// The content of `<workspace folder>/.env`, if that file exists.
    pub workspace_dot_env: Option<&'a str>,
    /// `name` of the resolved model ([`super::ComposeCli::config`] without a project name):
    /// what the files' top-level `name:` (or Compose's own default) gives.
    pub model_name: Option<&'a str>,
    /// The workspace folder (host path).
    pub workspace_folder: &'a Path,
    /// The first Compose file (host path); `None` when there is none (an empty
    /// `dockerComposeFile` array: Compose then works in the workspace folder).
    pub first_file: Option<&'a Path>,
}

/// The project name, first of:
/// 1. `COMPOSE_PROJECT_NAME` of the environment;
/// 2. the first `COMPOSE_PROJECT_NAME=<value>` line of `<workspace>/.env` (value trimmed);
/// 3. the resolved model's `name`, unless it is `devcontainer` (Compose's default for files
///    in a `.devcontainer` folder, which rule 4 replaces);
/// 4. `<workspace basename>_devcontainer` when the first file's folder is
///    `<workspace>/.devcontainer`;
/// 5. the basename of the first file's folder (the workspace folder without files);
///
/// each [`sanitize_project_name`]d, a value that sanitises to nothing falling through to the
/// next. Divergence (spec-note 0600): a file that declares `name: devcontainer` itself gets
/// rule 4 here, where the reference CLI reads the files' YAML and keeps `devcontainer`.
pub fn project_name(inputs: &ProjectNameInputs<'_>) -> String {
    let dot_env = inputs.workspace_dot_env.and_then(dot_env_project_name);
    let model = inputs.model_name.filter(|n| *n != "devcontainer");
    for candidate in [inputs.env, dot_env, model].into_iter().flatten() {
        let name = sanitize_project_name(candidate);
        if !name.is_empty() {
            return name;
        }
    }
    let workspace = normalize_lexically(inputs.workspace_folder);
    let folder = inputs
        .first_file
        .and_then(Path::parent)
        .map_or_else(|| workspace.clone(), normalize_lexically);
    if folder == workspace.join(".devcontainer") {
        let base = basename(&workspace);
        return sanitize_project_name(&format!("{base}_devcontainer"));
    }
    sanitize_project_name(&basename(&folder))
}

/// Compose v2's project name characters: lowercased, every character outside `[-_a-z0-9]`
/// removed (`My App.1` → `myapp1`).
pub fn sanitize_project_name(name: &str) -> String {
    name.to_lowercase()
        .chars()
        .filter(|c| matches!(c, 'a'..='z' | '0'..='9' | '-' | '_'))
        .collect()
}

/// The value of the first line `COMPOSE_PROJECT_NAME=<at least one character>`, trimmed.
fn dot_env_project_name(text: &str) -> Option<&str> {
    text.split(['\n', '\r', '\u{2028}', '\u{2029}'])
        .find_map(|line| {
            line.strip_prefix("COMPOSE_PROJECT_NAME=")
                .filter(|v| !v.is_empty())
        })
        .map(str::trim)
}

fn basename(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(ws: &'a str, first: Option<&'a str>) -> ProjectNameInputs<'a> {
        ProjectNameInputs {
            env: None,
            workspace_dot_env: None,
            model_name: None,
            workspace_folder: Path::new(ws),
            first_file: first.map(Path::new),
        }
    }

    #[test]
    fn the_environment_comes_first() {
        let mut i = inputs("/w/My.Repo", Some("/w/My.Repo/.devcontainer/c.yml"));
        i.env = Some("From Env!");
        i.workspace_dot_env = Some("COMPOSE_PROJECT_NAME=dotenv\n");
        i.model_name = Some("model");
        assert_eq!(project_name(&i), "fromenv");
    }

    #[test]
    fn then_the_workspace_dot_env_first_matching_line_trimmed() {
        let mut i = inputs("/w/r", Some("/w/r/.devcontainer/c.yml"));
        i.workspace_dot_env = Some(
            "A=1\nCOMPOSE_PROJECT_NAME=\nCOMPOSE_PROJECT_NAME= Dot_Env-2 \r\nCOMPOSE_PROJECT_NAME=later\n",
        );
        i.model_name = Some("model");
        assert_eq!(project_name(&i), "dot_env-2");
        // an indented or commented line is not the variable, as in the reference's match
        i.workspace_dot_env = Some("  COMPOSE_PROJECT_NAME=x\n#COMPOSE_PROJECT_NAME=y\n");
        assert_eq!(project_name(&i), "model");
    }

    #[test]
    fn a_value_that_sanitises_to_nothing_falls_through() {
        let mut i = inputs("/w/r", Some("/w/r/.devcontainer/c.yml"));
        i.env = Some("!!!");
        i.workspace_dot_env = Some("COMPOSE_PROJECT_NAME=...\n");
        assert_eq!(project_name(&i), "r_devcontainer");
    }

    #[test]
    fn then_the_model_name_unless_it_is_compose_default_devcontainer() {
        let mut i = inputs("/w/Repo", Some("/w/Repo/.devcontainer/c.yml"));
        i.model_name = Some("Named Project");
        assert_eq!(project_name(&i), "namedproject");
        i.model_name = Some("devcontainer");
        assert_eq!(project_name(&i), "repo_devcontainer");
    }

    #[test]
    fn files_in_the_devcontainer_folder_get_workspace_devcontainer() {
        let i = inputs("/w/My Repo/", Some("/w/My Repo/.devcontainer/sub/../c.yml"));
        assert_eq!(project_name(&i), "myrepo_devcontainer");
    }

    #[test]
    fn elsewhere_the_first_files_folder_basename() {
        let i = inputs("/w/repo", Some("/w/repo/deploy/Compose/c.yml"));
        assert_eq!(project_name(&i), "compose");
        let i = inputs("/w/repo", Some("/w/repo/c.yml"));
        assert_eq!(project_name(&i), "repo");
        // a folder named `.devcontainer` that is not the workspace's own
        let i = inputs("/w/repo", Some("/w/repo/x/.devcontainer/c.yml"));
        assert_eq!(project_name(&i), "devcontainer");
        let i = inputs("/w/Repo.Two", None);
        assert_eq!(project_name(&i), "repotwo");
    }

    #[test]
    fn sanitising_lowercases_and_keeps_only_compose_characters() {
        assert_eq!(sanitize_project_name("My App.1_x-Y"), "myapp1_x-y");
        assert_eq!(sanitize_project_name("Ünïcode"), "ncode");
        assert_eq!(sanitize_project_name(""), "");
    }
}
