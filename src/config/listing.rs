//! Listing a folder opened without following links (`openat` with `O_NOFOLLOW`): the build
//! context's and the Feature copy's walks both read a folder through its descriptor, so a
//! link swapped in for it meanwhile is never followed, and both want the same stable order.

use std::ffi::CString;
use std::os::fd::AsFd;

use rustix::fs::Dir;

/// The names in the open folder `dir` (without `.` and `..`), sorted: what is made from the
/// walk (a tar stream, a copy) does not depend on the file system's order.
///
/// Errors: reading the folder.
pub fn sorted_names(dir: impl AsFd) -> std::io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir)? {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_without_dot_entries() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b", "a", "c"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let fd = std::fs::File::open(dir.path()).unwrap();
        let names = sorted_names(&fd).unwrap();
        assert_eq!(names, [c"a", c"b", c"c"].map(CString::from));
    }
}
