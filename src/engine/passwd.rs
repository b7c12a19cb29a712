//! `/etc/passwd` lookups (pure): a user's uid, gid and home, as the spec's `_REMOTE_USER_HOME`
//! and `updateRemoteUserUID` need them and the security profile's home tmpfs uses them.

/// One `/etc/passwd` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswdEntry {
    /// Login name.
    pub name: String,
    /// Numeric user id.
    pub uid: u32,
    /// Numeric primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
}

/// Parses `/etc/passwd` text; malformed lines and comments are skipped.
pub fn parse(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 7 {
                return None;
            }
            Some(PasswdEntry {
                name: f[0].to_string(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: f[5].to_string(),
                shell: f[6].to_string(),
            })
        })
        .collect()
}

/// Finds `user` — a name, a uid, or `name:group` / `uid:gid` (the group part is ignored) — in
/// `/etc/passwd` text. The first matching line wins, as with `getpwnam`.
pub fn lookup(text: &str, user: &str) -> Option<PasswdEntry> {
    let who = user.split(':').next().unwrap_or(user);
    let entries = parse(text);
    match who.parse::<u32>() {
        Ok(uid) => entries.into_iter().find(|e| e.uid == uid),
        Err(_) => entries.into_iter().find(|e| e.name == who),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n# comment\nbroken line\n\
                          vscode:x:1000:1001::/home/vscode:/bin/bash\n\
                          nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";

    #[test]
    fn looks_up_by_name_uid_and_user_group() {
        assert_eq!(lookup(PASSWD, "vscode").unwrap().home, "/home/vscode");
        let e = lookup(PASSWD, "1000:1000").unwrap();
        assert_eq!((e.name.as_str(), e.uid, e.gid), ("vscode", 1000, 1001));
        assert_eq!(lookup(PASSWD, "0").unwrap().home, "/root");
        assert!(lookup(PASSWD, "ghost").is_none());
        assert_eq!(parse(PASSWD).len(), 3);
    }
}
