//! `/etc/passwd` lookups (pure), read the way the engine reads them: the one place devcell
//! turns a user spelling (`containerUser`, `remoteUser`, `-u`, an image's `USER`) into the
//! numeric uid a process gets, for the security policy's `root` judgement, the remote user's
//! home and ids (`_REMOTE_USER_HOME`, `updateRemoteUserUID`, the home tmpfs) alike.
//!
//! Docker and Podman both resolve a user with runc's `user.GetExecUser` (moby/sys/user) against
//! the container's `/etc/passwd`; devcell follows it exactly (spec-note 0420):
//! - the spec is split at `:` into user and group; only the user part decides the uid;
//! - a user part Go's `strconv.Atoi` accepts (optional `+`/`-` sign, ASCII digits: `00`, `+0`,
//!   `-0`) is a uid, whether or not an entry has it; a uid outside `0..=2147483647`
//!   (`4294967296`, `-1`) is refused by the engine unless an entry's id field reads as it
//!   (then runc truncates that id to 32 bits: [`is_root`] counts it as root);
//! - anything else (`0x0`, ` 0`, `root`) is a name: the first entry with exactly that name
//!   wins; no entry means the engine refuses to start;
//! - passwd lines are trimmed and every non-empty line is an entry (no comments); missing
//!   fields are empty and a uid/gid field that is not a number counts as 0, as runc's parser
//!   ignores conversion errors — so `evil:x:abc:…` or a bare `evil` line is uid 0.

/// The largest uid the engine accepts (runc's `maxID`, `2^31 - 1`).
pub const MAX_ID: i64 = i32::MAX as i64;

/// One `/etc/passwd` entry, as runc parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswdEntry {
    /// Login name.
    pub name: String,
    /// Numeric user id (0 when the field is missing or not a number, as in runc).
    pub uid: u32,
    /// Numeric primary group id (same rule).
    pub gid: u32,
    /// Home directory (empty when missing).
    pub home: String,
    /// Login shell (empty when missing).
    pub shell: String,
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign then ASCII digits, nothing else
/// (no spaces, no `0x`); `None` when it would fail (including overflow).
pub fn go_atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok()
}

/// A passwd id field as runc reads it: [`go_atoi`], conversion errors (and ids that do not
/// fit) counting as 0.
fn id_field(field: Option<&str>) -> u32 {
    field
        .and_then(go_atoi)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

/// Parses `/etc/passwd` text the way runc does: each trimmed, non-empty line is an entry
/// (`name:pass:uid:gid:gecos:home:shell`, missing fields empty / 0).
pub fn parse(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            let text = |i: usize| f.get(i).copied().unwrap_or_default().to_string();
            PasswdEntry {
                name: text(0),
                uid: id_field(f.get(2).copied()),
                gid: id_field(f.get(3).copied()),
                home: text(5),
                shell: text(6),
            }
        })
        .collect()
}

/// What a user spelling resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The user part is empty: the engine keeps its default (the image's `USER`, else uid 0).
    Default,
    /// The process gets this uid; `entry` is the passwd entry that matched (for a name, or a
    /// number that has one), `None` for a number without an entry.
    Uid {
        /// The numeric uid.
        uid: u32,
        /// The matching entry, if any.
        entry: Option<PasswdEntry>,
    },
    /// A numeric user outside `0..=`[`MAX_ID`]: the engine refuses it, unless a passwd entry's
    /// id field reads as that number (runc then takes the entry and truncates its id to 32
    /// bits: `4294967296` runs as 0); [`is_root`] counts it as root.
    OutOfRange(i64),
    /// A name the passwd text does not have: the engine refuses to start the container.
    Unknown(String),
    /// A name, and no passwd text to look it up in (`root` is still taken as uid 0).
    Unresolved(String),
}

impl Resolved {
    /// The uid, when known.
    pub fn uid(&self) -> Option<u32> {
        match self {
            Resolved::Uid { uid, .. } => Some(*uid),
            _ => None,
        }
    }
}

/// Resolves `user` (`name`, `uid`, `name:group`, `uid:gid`; see the module docs) against
/// `passwd` (the image's or container's `/etc/passwd` text; `None` when it could not be read).
pub fn resolve(user: &str, passwd: Option<&str>) -> Resolved {
    let who = user.split(':').next().unwrap_or_default();
    if who.is_empty() {
        return Resolved::Default;
    }
    let entries = passwd.map(parse);
    if let Some(n) = go_atoi(who) {
        if !(0..=MAX_ID).contains(&n) {
            return Resolved::OutOfRange(n);
        }
        let uid = n as u32;
        let entry = entries.and_then(|e| e.into_iter().find(|e| e.uid == uid));
        return Resolved::Uid { uid, entry };
    }
    match entries {
        Some(entries) => match entries.into_iter().find(|e| e.name == who) {
            Some(entry) => Resolved::Uid {
                uid: entry.uid,
                entry: Some(entry),
            },
            None => Resolved::Unknown(who.to_string()),
        },
        None if who == "root" => Resolved::Uid {
            uid: 0,
            entry: None,
        },
        None => Resolved::Unresolved(who.to_string()),
    }
}

/// Finds the entry `user` resolves to in `/etc/passwd` text ([`resolve`]): a name's first
/// entry, or the first entry with a numeric user's uid. `None` when there is none.
pub fn lookup(text: &str, user: &str) -> Option<PasswdEntry> {
    match resolve(user, Some(text)) {
        Resolved::Uid { entry, .. } => entry,
        _ => None,
    }
}

/// Whether `user` runs as uid 0 given `passwd` ([`resolve`]); an empty spelling (the engine's
/// default) counts as root when `default_is_root`. Names that cannot be resolved without a
/// passwd are not root here (the in-container check after creation speaks for them).
pub fn is_root(user: &str, passwd: Option<&str>, default_is_root: bool) -> bool {
    // A number past the uid range is no refusal when an entry has it: runc matches the entry's
    // id field as read and truncates it to 32 bits (`4294967296` runs as 0). A name with the
    // replacement character may match a passwd line read lossily where the engine, byte for
    // byte, matches another.
    if passwd.is_some() && user.contains(char::REPLACEMENT_CHARACTER) {
        return true;
    }
    match resolve(user, passwd) {
        Resolved::Default => default_is_root,
        Resolved::Uid { uid, .. } => uid == 0,
        Resolved::OutOfRange(_) => true,
        _ => false,
    }
}

/// Whether `user` is a name that cannot be judged because the passwd it would be looked up
/// in could not be read (`passwd` is `None` for that reason, not for "not read yet"): the engine
/// resolves it in a file devcell did not see, so it counts as root (spec-note 0420). `root`
/// and numeric spellings are judged without a passwd ([`is_root`]).
pub fn unjudged_name(user: &str, passwd: Option<&str>) -> bool {
    passwd.is_none() && matches!(resolve(user, None), Resolved::Unresolved(_))
}

/// `/etc/passwd` bytes as text for [`resolve`]: invalid UTF-8 (a Latin-1 GECOS field) is
/// replaced, never a reason to have no passwd; [`is_root`] counts a name holding the
/// replacement character as root, so no name can match a replaced line the engine would not.
pub fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
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

    #[test]
    fn every_spelling_of_uid_zero_is_root() {
        // Checked against `docker exec -u` on busybox (runc): all run as uid 0.
        for spelling in [
            "0",
            "00",
            "+0",
            "-0",
            "0:0",
            "0000:1000",
            "root",
            "root:staff",
        ] {
            assert_eq!(resolve(spelling, Some(PASSWD)).uid(), Some(0), "{spelling}");
            assert!(is_root(spelling, Some(PASSWD), false), "{spelling}");
            assert!(is_root(spelling, None, false), "{spelling} without passwd");
        }
        // Past the range: refused by the engine, unless an entry's id field reads as it
        // (runc then truncates that id: uid 0), so root either way.
        assert_eq!(
            resolve("4294967296", Some(PASSWD)),
            Resolved::OutOfRange(4294967296)
        );
        assert_eq!(resolve("-1", None), Resolved::OutOfRange(-1));
        let big = "big:x:4294967296:4294967296::/tmp:/bin/sh\n";
        assert!(is_root("4294967296", Some(big), false));
        assert!(is_root("-1", None, false));
        // A passwd that is not UTF-8 is read with replacements; a name holding the
        // replacement character could match a replaced line the engine would not: root.
        let latin1 = text_of(b"dev:x:1000:1000:Jos\xe9:/home/dev:/bin/sh\n\xe9:x:0:0::/:/bin/sh\n");
        assert_eq!(resolve("dev", Some(&latin1)).uid(), Some(1000));
        assert!(!is_root("dev", Some(&latin1), false));
        assert!(is_root("\u{fffd}", Some(&latin1), false));
        assert_eq!(
            resolve("0x0", Some(PASSWD)),
            Resolved::Unknown("0x0".into())
        );
        assert_eq!(resolve(" 0", Some(PASSWD)), Resolved::Unknown(" 0".into()));
        assert_eq!(resolve("", Some(PASSWD)), Resolved::Default);
        assert!(is_root("", None, true) && !is_root("", None, false));
        assert!(!is_root("1000:0", Some(PASSWD), true));
        assert!(!is_root("vscode", Some(PASSWD), true));
        assert_eq!(
            resolve("vscode", None),
            Resolved::Unresolved("vscode".into())
        );
    }

    #[test]
    fn names_resolve_through_the_first_entry_as_runc_parses_it() {
        // A second uid-0 account under another name, a duplicate name (first wins), an id
        // field that is not a number (runc counts it as 0), a bare name line, leading spaces.
        let passwd = "toor:x:0:0::/root:/bin/sh\n\
                      dup:x:0:0::/:/bin/sh\ndup:x:1000:1000::/home/dup:/bin/sh\n\
                      weird:x:abc:1::/:/bin/sh\n\
                      bare\n\
                      # comment:x:1:1::/:/bin/sh\n\
                        spaced:x:1002:1002::/home/spaced:/bin/sh\n";
        for root in ["toor", "dup", "weird", "bare"] {
            assert!(is_root(root, Some(passwd), false), "{root}");
        }
        let spaced = lookup(passwd, "spaced").unwrap();
        assert_eq!((spaced.uid, spaced.home.as_str()), (1002, "/home/spaced"));
        assert_eq!(lookup(passwd, "# comment").unwrap().uid, 1);
        // A numeric user without an entry keeps its uid.
        assert_eq!(
            resolve("4242", Some(passwd)),
            Resolved::Uid {
                uid: 4242,
                entry: None
            }
        );
    }

    #[test]
    fn go_atoi_matches_go() {
        assert_eq!(go_atoi("+0"), Some(0));
        assert_eq!(go_atoi("-0"), Some(0));
        assert_eq!(go_atoi("007"), Some(7));
        for bad in ["", "+", "0x0", " 0", "0 ", "1e3", "١"] {
            assert_eq!(go_atoi(bad), None, "{bad:?}");
        }
    }
}
