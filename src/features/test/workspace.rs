//! The temporary workspace of one [`TestCase`]: `.devcontainer/devcontainer.json`, the
//! collection's Feature folders beside it (`.devcontainer/<id>/`), and at the root the test
//! folder's files and the test library, as the reference lays it out.
//!
//! The workspace is bound into the test container, so copying never follows a link: a link
//! in the collection is copied as the link it is (it resolves inside the container, where
//! the host's files are not), and anything but files, folders and links is left out.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{TEST_LIBRARY, TEST_LIBRARY_NAME, TestCase, TestError};

/// Writes the workspace of `case` into the empty folder `dir` (made readable by every user:
/// the container's user is not the host's).
///
/// Errors: [`TestError::Io`] naming the path that could not be read or written.
pub fn write(case: &TestCase, dir: &Path) -> Result<(), TestError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| TestError::Io { path, source }
    };
    set_mode(dir, 0o755)?;
    let devcontainer = dir.join(".devcontainer");
    std::fs::create_dir(&devcontainer).map_err(io(&devcontainer))?;
    set_mode(&devcontainer, 0o755)?;
    let config = dir.join(".devcontainer/devcontainer.json");
    let text = serde_json::to_string_pretty(&case.config).expect("a JSON value serialises");
    std::fs::write(&config, text).map_err(io(&config))?;
    set_mode(&config, 0o644)?;
    for (folder, source) in &case.features {
        let to = devcontainer.join(folder);
        std::fs::create_dir(&to).map_err(io(&to))?;
        set_mode(&to, 0o755)?;
        copy_tree(source, &to, None)?;
        if source.file_name() != Some(std::ffi::OsStr::new(folder)) {
            rename_copy(&to, folder)?;
        }
    }
    // a scenario's own folder (its Dockerfile, …) beside the generated devcontainer.json, as
    // the reference copies it after writing that file
    if let Some(folder) = &case.scenario_folder {
        copy_tree(folder, &devcontainer, None)?;
    }
    // the test folder's files are run by the container's user: executable by all, as the
    // reference makes them
    copy_tree(&case.scripts, dir, Some(0o755))?;
    let lib = dir.join(TEST_LIBRARY_NAME);
    std::fs::write(&lib, TEST_LIBRARY).map_err(io(&lib))?;
    set_mode(&lib, 0o644)
}

/// Gives the duplicate test's copy (`<id>-0`) the `id` of its folder: devcell requires a
/// local Feature's `id` to equal its folder's name (the reference does not check; spec-note
/// 0650). The copy's metadata is written back as plain JSON.
fn rename_copy(dir: &Path, folder: &str) -> Result<(), TestError> {
    let file = dir.join(crate::features::metadata::FEATURE_FILE);
    let text = std::fs::read_to_string(&file).map_err(|source| TestError::Io {
        path: file.clone(),
        source,
    })?;
    let mut metadata = crate::config::jsonc::parse(&file, &text)
        .map_err(|e| TestError::Scenarios {
            file: file.clone(),
            message: e.to_string(),
        })?
        .value;
    metadata["id"] = folder.into();
    let text = serde_json::to_string_pretty(&metadata).expect("a JSON value serialises");
    std::fs::write(&file, text).map_err(|source| TestError::Io { path: file, source })
}

/// Copies the folder `from` into the existing folder `to`: files (with `file_mode`, or
/// their own mode made readable by all), folders (0755) and links as links, through
/// descriptors ([`crate::features::nofollow_copy`]): a folder of the collection swapped for a
/// link to a host folder while it is copied is copied as that link, never followed (attack 28,
/// F2's remainder). `from` itself is the user's folder, opened as given.
fn copy_tree(from: &Path, to: &Path, file_mode: Option<u32>) -> Result<(), TestError> {
    use crate::features::nofollow_copy::{CopyOptions, FileMode, Links, Root};
    let options = CopyOptions {
        links: Links::Keep,
        root: Root::AsGiven,
        dir_mode: 0o755,
        file_mode: file_mode.map_or(FileMode::OwnReadableByAll, FileMode::Fixed),
    };
    crate::features::nofollow_copy::copy_tree(from, to, &options).map_err(|e| TestError::Io {
        path: e.path,
        source: e.source,
    })
}

fn set_mode(path: &Path, mode: u32) -> Result<(), TestError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        TestError::Io {
            path: path.to_owned(),
            source,
        }
    })
}
