# Adds the non-root user devcell provides for an image that runs as root when the
# configuration names no user (spec-note 0188). Arguments: user, UID, GID; an empty UID or
# GID means the first free one from 1000. The UID may be another user's already (the
# workspace user's uid is what the files the user writes should belong to); the GID's group is
# used when there is one, else a group named like the user is added. Edits /etc/passwd,
# /etc/group (and /etc/shadow when there is one) by appending, so it works on images without
# useradd (busybox). An image that has the user already keeps it as it is. Written by devcell.
set -e
devcell_user=$1
devcell_uid=$2
devcell_gid=$3
devcell_has() { # file field value: whether a line of file has value in field
    [ -f "$1" ] && awk -F: -v f="$2" -v v="$3" '$f == v { found = 1 } END { exit !found }' "$1"
}
devcell_free() { # file: the first id from 1000 no line of file has
    if [ -f "$1" ]; then
        awk -F: 'BEGIN { id = 1000 } { used[$3] = 1 } END { while (id in used) id++; print id }' "$1"
    else
        echo 1000
    fi
}
devcell_append() { # file line: appends line, on a line of its own
    if [ -s "$1" ] && [ -n "$(tail -c 1 "$1")" ]; then
        echo >> "$1"
    fi
    printf '%s\n' "$2" >> "$1"
}
if devcell_has /etc/passwd 1 "$devcell_user"; then
    echo "devcell: the image has a user $devcell_user already; kept as it is"
    exit 0
fi
if [ -z "$devcell_uid" ]; then
    devcell_uid=$(devcell_free /etc/passwd)
fi
if [ -z "$devcell_gid" ]; then
    devcell_gid=$devcell_uid
    if devcell_has /etc/group 3 "$devcell_gid"; then
        devcell_gid=$(devcell_free /etc/group)
    fi
fi
if ! devcell_has /etc/group 3 "$devcell_gid"; then
    if devcell_has /etc/group 1 "$devcell_user"; then
        devcell_gid=$(awk -F: -v u="$devcell_user" '$1 == u { print $3; exit }' /etc/group)
    else
        devcell_append /etc/group "$devcell_user:x:$devcell_gid:"
    fi
fi
devcell_home=/home/$devcell_user
mkdir -p "$devcell_home"
chown "$devcell_uid:$devcell_gid" "$devcell_home"
chmod 755 "$devcell_home"
devcell_append /etc/passwd \
    "$devcell_user:x:$devcell_uid:$devcell_gid:user provided by devcell:$devcell_home:/bin/sh"
if [ -f /etc/shadow ]; then
    devcell_append /etc/shadow "$devcell_user:!::0:99999:7:::"
fi
echo "devcell: added user $devcell_user with UID $devcell_uid and GID $devcell_gid"
