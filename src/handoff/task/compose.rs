//! A clone task's own Compose project (spec-note 0437, "Per-task Compose projects").
//!
//! The reference CLI's rule (spec-note 0600) names a project after the workspace folder's
//! basename, the repository's `.env` or the files' `name:`: every clone of one repository
//! would get the same name, and a second task's `up` would be refused as another workspace's
//! project (0603) or, worse, share networks and named volumes with the first. Each task gets
//! a name of its own instead, passed as `COMPOSE_PROJECT_NAME` (the first source 0600 reads),
//! so it wins over the repository's `.env` and `name:`, which every task's clone holds alike.

use crate::engine::compose::sanitize_project_name;

use super::TaskRecord;

/// The variable [`project_name`] is passed in (0600's first source).
pub const PROJECT_VARIABLE: &str = "COMPOSE_PROJECT_NAME";

/// How many characters of the repository's (or workspace's) name and of the task's name the
/// project name keeps: Compose prefixes every container, network and volume with it.
const PART_MAX: usize = 24;

/// The Compose project name of the task of `record`: `<repo>-<task>-<8 hex>`, each part
/// [`sanitize_project_name`]d and cut to [`PART_MAX`]; the hex digits are the sha256 of the
/// task folder (one per task of one state folder), so two tasks whose names sanitise alike
/// (`a.b`, `ab`, `Fix` of another repository) or whose repositories share a folder name still
/// differ. Stable for the task's life: a continued task, its `delete` and `status` find the
/// same project. For a multi-repository workspace `<repo>` is the workspace root's name.
pub fn project_name(record: &TaskRecord) -> String {
    let base = record
        .workspace
        .as_deref()
        .and_then(|w| w.file_name())
        .map_or_else(|| record.repo.clone(), |n| n.to_string_lossy().into_owned());
    project_name_of(&base, &record.task, &record.folder())
}

/// [`project_name`] of task `task` whose folder is `folder`, from `base` (the repository's or
/// the multi-repository workspace's name): what `handoff --plan --isolation clone` shows
/// before the task exists.
pub fn project_name_of(base: &str, task: &str, folder: &std::path::Path) -> String {
    use sha2::Digest as _;
    let part = |s: &str| -> String {
        let clean: String = sanitize_project_name(s).chars().take(PART_MAX).collect();
        if clean.is_empty() {
            "task".to_string()
        } else {
            clean
        }
    };
    let digest = sha2::Sha256::digest(folder.as_os_str().as_encoded_bytes());
    format!(
        "{}-{}-{}",
        part(base),
        part(task),
        &hex::encode(digest)[..8]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn record(folder: &Path, repo: &str, task: &str, workspace: Option<&str>) -> TaskRecord {
        let clone = match workspace {
            Some(_) => folder.join("workspace").join(repo),
            None => folder.join(repo),
        };
        TaskRecord {
            task: task.into(),
            source: PathBuf::from("/src").join(repo),
            source_git_dir: PathBuf::from("/src").join(repo).join(".git"),
            source_head_git_dir: None,
            repo: repo.into(),
            clone,
            branch: format!("devcell/{task}"),
            base_ref: "HEAD".into(),
            base: "0".repeat(40),
            object_format: "sha1".into(),
            fetched: None,
            fetched_at: None,
            refused: None,
            created_at: String::new(),
            source_id: None,
            workspace: workspace.map(PathBuf::from),
        }
    }

    /// Each task its own name, stable for the task, valid for Compose, whatever the task and
    /// repository names sanitise to.
    #[test]
    fn each_task_gets_a_project_name_of_its_own() {
        let root = Path::new("/state/tasks/k1");
        let a = project_name(&record(&root.join("fix-1"), "api", "fix-1", None));
        let b = project_name(&record(&root.join("fix-2"), "api", "fix-2", None));
        assert!(a.starts_with("api-fix-1-"), "{a}");
        assert_ne!(a, b);
        assert_eq!(
            a,
            project_name(&record(&root.join("fix-1"), "api", "fix-1", None)),
            "stable"
        );
        // names that sanitise alike, and one repository name in two places, still differ
        let dotted = project_name(&record(&root.join("a.b"), "api", "a.b", None));
        let plain = project_name(&record(&root.join("ab"), "api", "ab", None));
        assert_ne!(dotted, plain);
        let other = project_name(&record(
            Path::new("/state/tasks/k2/fix-1"),
            "api",
            "fix-1",
            None,
        ));
        assert_ne!(a, other);
        // nothing Compose refuses: lower case, `[a-z0-9_-]`, starting with a letter or digit
        let odd = project_name(&record(
            &root.join("Ü"),
            "Ünïcode.Repo",
            &"X".repeat(64),
            None,
        ));
        for name in [&a, &dotted, &odd] {
            assert_eq!(sanitize_project_name(name), *name);
            assert!(name.as_bytes()[0].is_ascii_alphanumeric(), "{name}");
        }
        assert!(odd.len() <= 2 * PART_MAX + 10, "{odd}");
        // a multi-repository workspace is named after its root
        let multi = project_name(&record(&root.join("m"), "api", "m", Some("/src/grove")));
        assert!(multi.starts_with("grove-m-"), "{multi}");
    }
}
