#!/bin/sh
# devcell Feature `agent-user`: creates a non-root user for a coding agent.
# Options arrive as USERNAME, USERUID, USERGID, USERHOME, USERSHELL (devcontainer-features.env).
# Idempotent: an existing user with the same name and UID is accepted as is.
set -eu

fail() {
    echo "agent-user: $*" >&2
    exit 1
}

name="${USERNAME:-agent}"
uid="${USERUID:-1000}"
gid="${USERGID:-}"
home="${USERHOME:-}"
shell="${USERSHELL:-/bin/sh}"

[ "$(id -u)" = 0 ] || fail "must run as root (Features install as root)"

case "$name" in
    '' | *[!a-z0-9_-]* | [!a-z_]*)
        fail "invalid username '$name': use lowercase letters, digits, '_' and '-', starting with a letter or '_'" ;;
esac
[ "${#name}" -le 32 ] || fail "username '$name' is longer than 32 characters"
case "$uid" in
    '' | *[!0-9]*) fail "userUid '$uid' is not a number" ;;
esac
[ "$uid" -ne 0 ] || fail "userUid 0 is root; the agent user must not be root"
[ -n "$gid" ] || gid="$uid"
case "$gid" in
    *[!0-9]*) fail "userGid '$gid' is not a number" ;;
esac
[ -n "$home" ] || home="/home/$name"
case "$home" in
    /*) ;;
    *) fail "userHome '$home' is not an absolute path" ;;
esac
case "$shell" in
    /*) ;;
    *) fail "userShell '$shell' is not an absolute path" ;;
esac
if [ ! -x "$shell" ]; then
    echo "agent-user: shell '$shell' does not exist; using /bin/sh" >&2
    shell=/bin/sh
fi

# field FILE KEY_FIELD KEY OUT_FIELD: first matching line's OUT_FIELD (files, not NSS: the
# image's own databases are what a build changes).
field() {
    [ -f "$1" ] || return 0
    awk -F: -v kf="$2" -v k="$3" -v of="$4" '$kf == k { print $of; exit }' "$1"
}

existing_uid="$(field /etc/passwd 1 "$name" 3)"
if [ -n "$existing_uid" ]; then
    [ "$existing_uid" = "$uid" ] || fail "user '$name' already exists with UID $existing_uid, not $uid"
    echo "agent-user: user '$name' (UID $uid) already exists"
    exit 0
fi
owner="$(field /etc/passwd 3 "$uid" 1)"
[ -z "$owner" ] || fail "UID $uid is already used by user '$owner'; choose another userUid"

group="$(field /etc/group 3 "$gid" 1)"
create_group=no
if [ -z "$group" ]; then
    group="$name"
    other_gid="$(field /etc/group 1 "$group" 3)"
    [ -z "$other_gid" ] || fail "group '$group' already exists with GID $other_gid, not $gid"
    create_group=yes
fi

if command -v useradd > /dev/null 2>&1; then
    method=useradd
    if [ "$create_group" = yes ]; then groupadd -g "$gid" "$group"; fi
    useradd -l -m -d "$home" -s "$shell" -u "$uid" -g "$gid" "$name"
elif command -v adduser > /dev/null 2>&1 && command -v addgroup > /dev/null 2>&1; then
    method=adduser
    if [ "$create_group" = yes ]; then addgroup -g "$gid" "$group"; fi
    adduser -D -h "$home" -s "$shell" -u "$uid" -G "$group" "$name"
else
    method=files
    if [ "$create_group" = yes ]; then
        printf '%s:x:%s:\n' "$group" "$gid" >> /etc/group
    fi
    printf '%s:x:%s:%s::%s:%s\n' "$name" "$uid" "$gid" "$home" "$shell" >> /etc/passwd
    if [ -f /etc/shadow ]; then
        printf '%s:!:::::::\n' "$name" >> /etc/shadow
    fi
fi

if [ ! -d "$home" ]; then
    mkdir -p "$home"
    if [ -d /etc/skel ]; then cp -R /etc/skel/. "$home"/ 2> /dev/null || true; fi
fi
chown -R "$uid:$gid" "$home"
chmod 0750 "$home"

echo "agent-user: created user '$name' (UID $uid, GID $gid, home $home, shell $shell) with $method"
id "$name"
