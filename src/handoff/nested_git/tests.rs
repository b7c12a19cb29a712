use super::*;
use crate::handoff::repository::{Layout, Workspace};

fn workspace(root: &Path) -> Workspace {
    Workspace::bare("ws", root, "/workspaces/ws", Layout::Repository)
}

/// The main repository's container git directory, as `repo_gits` makes it.
fn main_repo(root: &Path) -> RepoGit {
    RepoGit::plain(
        "ws",
        root,
        "/workspaces/ws",
        "/state/1",
        "/run/devcell/git/1",
    )
}

/// A workspace repository with a gitignored clone `vendor/lib` and a linked worktree
/// `.wt/feat` (the K2 and K4 setups), as files only.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
    std::fs::create_dir_all(root.join(".git/worktrees/feat")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(root.join(".git/worktrees/feat/commondir"), "../..\n").unwrap();
    std::fs::create_dir_all(root.join("vendor/lib/.git/hooks")).unwrap();
    std::fs::write(root.join("vendor/lib/.git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(root.join(".wt/feat")).unwrap();
    std::fs::write(
        root.join(".wt/feat/.git"),
        format!("gitdir: {}\n", root.join(".git/worktrees/feat").display()),
    )
    .unwrap();
    (tmp, root)
}

fn grants(values: &[&str]) -> crate::security::Grants {
    crate::security::Grants::parse(values).unwrap()
}

/// Attacks K2 and K4: a nested repository that is no submodule and a linked worktree inside
/// the workspace are covered: the entry read-only on itself, every folder up to the root on
/// itself; the main repository's `.git` is its container git directory's, left alone.
#[test]
fn a_nested_repository_and_a_worktree_inside_the_workspace_are_covered() {
    let (_t, root) = tree();
    let ws = workspace(&root);
    let gits = [main_repo(&root)];
    let identity = crate::handoff::git_identity::record(&root);
    let nested = judge(&ws, &gits, &identity, None).unwrap();
    assert_eq!(nested.entries, [".wt/feat/.git", "vendor/lib/.git"]);
    assert_eq!(nested.folders, [".wt", "vendor", ".wt/feat", "vendor/lib"]);
    assert!(nested.accepted.is_empty() && nested.warnings().is_empty());
    let mounts = nested.mounts();
    let shown: Vec<(String, bool)> = mounts
        .iter()
        .map(|m| (m.target.clone(), m.read_only))
        .collect();
    assert_eq!(
        shown,
        [
            ("/workspaces/ws/.wt".to_string(), false),
            ("/workspaces/ws/vendor".to_string(), false),
            ("/workspaces/ws/.wt/feat".to_string(), false),
            ("/workspaces/ws/vendor/lib".to_string(), false),
            ("/workspaces/ws/.wt/feat/.git".to_string(), true),
            ("/workspaces/ws/vendor/lib/.git".to_string(), true),
        ]
    );
    assert!(mounts.iter().all(|m| m.source.starts_with(&root)));
    let covers = nested.covers();
    assert!(covers.contains(&(
        root.join("vendor/lib/.git"),
        "/workspaces/ws/vendor/lib/.git".to_string()
    )));
}

/// What cannot be covered refuses the handoff, naming it and its grant: a `.git` file naming
/// a git directory outside the workspace or a writable folder in it, a `.git` link, a
/// `commondir` naming another git directory, a walk cut at its bound. Granted, a warning.
#[test]
fn what_cannot_be_covered_refuses_the_handoff_unless_accepted() {
    let (tmp, root) = tree();
    let outside = std::fs::canonicalize(tmp.path())
        .unwrap()
        .join("outside.git");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(
        root.join("a/.git"),
        format!("gitdir: {}\n", outside.display()),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("b/plain")).unwrap();
    std::fs::write(root.join("b/.git"), "gitdir: plain\n").unwrap();
    std::fs::create_dir_all(root.join("c")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("c/.git")).unwrap();
    std::fs::create_dir_all(root.join("d/.git")).unwrap();
    std::fs::write(
        root.join("d/.git/commondir"),
        format!("{}\n", outside.display()),
    )
    .unwrap();
    let ws = workspace(&root);
    let gits = [main_repo(&root)];
    let mut identity = crate::handoff::git_identity::record(&root);
    identity.truncated = true;
    let e = judge(&ws, &gits, &identity, None).unwrap_err();
    let refused: Vec<&str> = e.items.iter().map(|u| u.rel.as_str()).collect();
    assert_eq!(
        refused,
        ["a/.git", "b/.git", "c/.git", "d/.git", "*"],
        "{e}"
    );
    assert_eq!(e.items[0].why, Why::PointsElsewhere(outside.clone()));
    assert_eq!(e.items[1].why, Why::PointsElsewhere(root.join("b/plain")));
    assert_eq!(e.items[2].why, Why::Link);
    assert_eq!(e.items[3].why, Why::CommonDirElsewhere(outside.clone()));
    let hint = crate::ops::error::ProductError::hint(&e).unwrap();
    assert!(
        hint.contains("`--allow uncovered-git:a/.git`")
            && hint.contains("`--allow uncovered-git:*`"),
        "{hint}"
    );
    assert!(e.to_string().contains("a/.git"), "{e}");

    // one accepted by name, the rest still refused
    let e = judge(
        &ws,
        &gits,
        &identity,
        Some(&grants(&["uncovered-git:a/.git"])),
    )
    .unwrap_err();
    assert_eq!(e.items.len(), 4, "{e}");
    // all accepted: the coverable ones are still covered, the others warned about
    let nested = judge(&ws, &gits, &identity, Some(&grants(&["uncovered-git:*"]))).unwrap();
    assert_eq!(nested.entries, [".wt/feat/.git", "vendor/lib/.git"]);
    assert_eq!(nested.accepted.len(), 5);
    assert!(nested.warnings()[0].contains("`a/.git` below the workspace is not covered"));
}

/// A folder the walk could not list is named (what it holds is not known), and past
/// [`MAX_COVERED`] entries the handoff is refused.
#[test]
fn an_unlisted_folder_and_too_many_entries_refuse_the_handoff() {
    let (_t, root) = tree();
    let ws = workspace(&root);
    let gits = [main_repo(&root)];
    let mut identity = crate::handoff::git_identity::record(&root);
    identity.unlisted.push("secret".into());
    let e = judge(&ws, &gits, &identity, None).unwrap_err();
    assert_eq!(e.items[0].rel, "secret");
    assert_eq!(e.items[0].why, Why::Unlisted);

    for i in 0..=MAX_COVERED {
        std::fs::create_dir_all(root.join(format!("many/r{i}/.git"))).unwrap();
    }
    let identity = crate::handoff::git_identity::record(&root);
    let e = judge(&ws, &gits, &identity, None).unwrap_err();
    assert_eq!(e.items.len(), 1, "{e}");
    assert!(
        matches!(e.items[0].why, Why::TooMany(n) if n == MAX_COVERED + 3),
        "{e}"
    );
}

/// A submodule devcell already covers (its `.git` over a container git directory), one under
/// a folder bound read-only, and a `.git` inside a host git directory are left alone; the
/// folder chain stops at a folder the handoff already binds on itself.
#[test]
fn what_the_container_git_directories_cover_is_left_alone() {
    let (_t, root) = tree();
    std::fs::create_dir_all(root.join("libs/sub/.git")).unwrap();
    std::fs::create_dir_all(root.join("libs/sub/deep/x/.git")).unwrap();
    std::fs::create_dir_all(root.join("ro/y/.git")).unwrap();
    let ws = workspace(&root);
    let mut sub = main_repo(&root.join("libs/sub"));
    sub.nested = true;
    sub.folders = vec![
        crate::handoff::container_git::FolderBind {
            source: root.join("libs"),
            target: "/workspaces/ws/libs".into(),
            read_only: false,
        },
        crate::handoff::container_git::FolderBind {
            source: root.join("libs/sub"),
            target: "/workspaces/ws/libs/sub".into(),
            read_only: false,
        },
        crate::handoff::container_git::FolderBind {
            source: root.join("ro"),
            target: "/workspaces/ws/ro".into(),
            read_only: true,
        },
    ];
    let gits = [main_repo(&root), sub];
    let identity = crate::handoff::git_identity::record(&root);
    let nested = judge(&ws, &gits, &identity, None).unwrap();
    assert_eq!(
        nested.entries,
        [".wt/feat/.git", "libs/sub/deep/x/.git", "vendor/lib/.git"]
    );
    assert!(
        nested.folders.contains(&"libs/sub/deep".to_string())
            && !nested.folders.contains(&"libs/sub".to_string())
            && !nested.folders.contains(&"libs".to_string()),
        "{:?}",
        nested.folders
    );
}

/// Attack L3: a bare repository in the workspace (`upstream.git`, a local remote) is a git
/// directory under another name: it is covered read-only whole, as a `.git` folder is (its
/// `hooks/` and `config` out of the agent's reach), with the folders above it on themselves;
/// what the walk found inside it (its `worktrees/`) is covered with it, not bound again. The
/// workspace folder itself laid out so cannot be covered: refused unless accepted.
#[test]
fn a_bare_repository_in_the_workspace_is_covered() {
    let (_t, root) = tree();
    for dir in [
        "remotes/upstream.git/objects",
        "remotes/upstream.git/refs/heads",
        "remotes/upstream.git/hooks",
        "remotes/upstream.git/worktrees/w",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(
        root.join("remotes/upstream.git/HEAD"),
        "ref: refs/heads/main\n",
    )
    .unwrap();
    std::fs::write(root.join("remotes/upstream.git/worktrees/w/HEAD"), "0\n").unwrap();
    std::fs::write(
        root.join("remotes/upstream.git/worktrees/w/commondir"),
        "../..\n",
    )
    .unwrap();
    let ws = workspace(&root);
    let gits = [main_repo(&root)];
    let identity = crate::handoff::git_identity::record(&root);
    assert!(
        identity.entries["remotes/upstream.git"].bare,
        "{identity:?}"
    );
    let nested = judge(&ws, &gits, &identity, None).unwrap();
    assert_eq!(
        nested.entries,
        [".wt/feat/.git", "remotes/upstream.git", "vendor/lib/.git"]
    );
    assert!(nested.folders.contains(&"remotes".to_string()));
    assert!(
        !nested
            .folders
            .iter()
            .any(|f| f.starts_with("remotes/upstream.git"))
    );
    let bare = nested
        .mounts()
        .into_iter()
        .find(|m| m.target == "/workspaces/ws/remotes/upstream.git")
        .unwrap();
    assert!(bare.read_only && bare.source == root.join("remotes/upstream.git"));

    std::fs::write(root.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(root.join("objects")).unwrap();
    std::fs::create_dir_all(root.join("refs")).unwrap();
    let identity = crate::handoff::git_identity::record(&root);
    let err = judge(&ws, &gits, &identity, None).unwrap_err();
    assert!(
        err.items
            .iter()
            .any(|u| u.rel == "." && u.why == Why::RootIsGitDir),
        "{err}"
    );
    let g = grants(&["uncovered-git:."]);
    assert!(judge(&ws, &gits, &identity, Some(&g)).is_ok());
}

/// Attack L9: a folder deeper than the walk makes the handoff refuse naming that folder, not
/// `*`: it is the only folder the walk did not read whole (every other one was read, attack
/// M9), so the user accepts it alone, and that grant accepts nothing else; the session that
/// made it is told loudly at its end.
#[test]
fn a_cut_walk_names_its_folder_and_a_wildcard_is_not_needed() {
    let (tmp, root) = tree();
    let before = crate::handoff::git_identity::record(&root);
    let deep: PathBuf =
        std::iter::repeat_n("a", crate::security::git_entries::MAX_DEPTH + 8).collect();
    std::fs::create_dir_all(root.join(&deep)).unwrap();
    let ws = workspace(&root);
    let gits = [main_repo(&root)];
    let identity = crate::handoff::git_identity::record(&root);
    assert!(identity.truncated, "{identity:?}");
    let cut: String = std::iter::repeat_n("a", crate::security::git_entries::MAX_DEPTH + 1)
        .collect::<Vec<_>>()
        .join("/");
    assert_eq!(identity.cut, std::slice::from_ref(&cut));
    let e = judge(&ws, &gits, &identity, None).unwrap_err();
    let refused: Vec<&str> = e.items.iter().map(|u| u.rel.as_str()).collect();
    assert_eq!(refused, [cut.as_str()], "{e}");
    assert_eq!(e.items[0].grant(), format!("--allow uncovered-git:{cut}"));
    let grant = format!("uncovered-git:{cut}");
    let nested = judge(&ws, &gits, &identity, Some(&grants(&[grant.as_str()]))).unwrap();
    assert_eq!(nested.accepted.len(), 1);

    // the folder's grant accepts nothing else
    let outside = std::fs::canonicalize(tmp.path()).unwrap().join("o.git");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(root.join("x")).unwrap();
    std::fs::write(
        root.join("x/.git"),
        format!("gitdir: {}\n", outside.display()),
    )
    .unwrap();
    let identity = crate::handoff::git_identity::record(&root);
    let e = judge(&ws, &gits, &identity, Some(&grants(&[grant.as_str()]))).unwrap_err();
    let refused: Vec<&str> = e.items.iter().map(|u| u.rel.as_str()).collect();
    assert_eq!(refused, ["x/.git"], "{e}");

    // the session that cut the walk hears it
    let changes = crate::handoff::git_identity::compare_changes(&before, &identity);
    let cut_change = changes.iter().find(|c| c.code == "git_walk_cut").unwrap();
    assert!(
        cut_change.loud && cut_change.message.contains(&cut),
        "{changes:?}"
    );
}

/// Attack M9: where the walk's folder bound stops it, the handoff names every folder the walk
/// did not read, not only the one it was reading: a grant of that one does not accept a walk
/// that never saw a nested repository in a folder after it, which stays refused until the user
/// accepts that folder too.
#[test]
fn a_grant_of_one_cut_folder_does_not_accept_the_folders_the_walk_never_read() {
    use crate::security::git_entries::{Bounds, MAX_DEPTH, find_within};
    let (_t, root) = tree();
    // read in name order: `.wt`, then `b4`, where the bound runs out; `vendor` is never read
    for i in 0..10 {
        std::fs::create_dir_all(root.join(format!("b4/{i}"))).unwrap();
    }
    let walk = find_within(
        &root,
        Bounds {
            folders: 6,
            depth: MAX_DEPTH,
        },
    );
    let mut identity = crate::handoff::git_identity::record(&root);
    identity
        .entries
        .retain(|rel, _| walk.entries.iter().any(|e| e.rel == *rel));
    identity.truncated = walk.truncated;
    identity.cut = walk.cut;
    assert!(
        !identity.entries.contains_key("vendor/lib/.git"),
        "{identity:?}"
    );
    let ws = workspace(&root);
    let gits = [main_repo(&root)];
    let refused = |g: &[&str]| -> Vec<String> {
        match judge(&ws, &gits, &identity, Some(&grants(g))) {
            Ok(_) => Vec::new(),
            Err(e) => e.items.iter().map(|u| u.rel.clone()).collect(),
        }
    };
    assert_eq!(refused(&[]), ["b4", "vendor"]);
    assert_eq!(refused(&["uncovered-git:b4"]), ["vendor"]);
    let nested = judge(
        &ws,
        &gits,
        &identity,
        Some(&grants(&["uncovered-git:b4", "uncovered-git:vendor"])),
    )
    .unwrap();
    assert_eq!(nested.accepted.len(), 2);
    assert!(nested.warnings().iter().any(|w| w.contains("`vendor`")));
}
