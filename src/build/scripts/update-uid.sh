# Gives a user the host user's UID and GID (updateRemoteUserUID), editing /etc/passwd and
# /etc/group with awk (works on images without usermod, e.g. busybox) and handing the user's
# home folder to the new ids. Arguments: user, new UID, new GID. Leaves the image unchanged
# when the user is missing, already has these ids, or is root, or when another user has the
# UID; keeps the GID when another group has it. Written by devcell.
set -e
devcell_user=$1
devcell_new_uid=$2
devcell_new_gid=$3
devcell_entry=$(awk -F: -v u="$devcell_user" '$1 == u { print; exit }' /etc/passwd)
if [ -z "$devcell_entry" ]; then
    echo "devcell: user $devcell_user is not in /etc/passwd; UID left unchanged"
    exit 0
fi
devcell_old_uid=$(printf '%s\n' "$devcell_entry" | cut -d: -f3)
devcell_old_gid=$(printf '%s\n' "$devcell_entry" | cut -d: -f4)
devcell_home=$(printf '%s\n' "$devcell_entry" | cut -d: -f6)
if [ "$devcell_old_uid" = 0 ]; then
    echo "devcell: user $devcell_user has UID 0; left unchanged"
    exit 0
fi
if [ "$devcell_old_uid" != "$devcell_new_uid" ] && awk -F: -v id="$devcell_new_uid" \
    '$3 == id { found = 1 } END { exit !found }' /etc/passwd; then
    echo "devcell: another user has UID $devcell_new_uid; UID of $devcell_user left unchanged"
    exit 0
fi
if [ "$devcell_old_gid" = 0 ]; then
    devcell_new_gid=0
elif [ "$devcell_old_gid" != "$devcell_new_gid" ] && awk -F: -v id="$devcell_new_gid" \
    '$3 == id { found = 1 } END { exit !found }' /etc/group; then
    echo "devcell: a group has GID $devcell_new_gid already; GID of $devcell_user kept at $devcell_old_gid"
    devcell_new_gid=$devcell_old_gid
fi
if [ "$devcell_old_uid" = "$devcell_new_uid" ] && [ "$devcell_old_gid" = "$devcell_new_gid" ]; then
    echo "devcell: user $devcell_user has UID $devcell_new_uid and GID $devcell_new_gid already"
    exit 0
fi
devcell_tmp=$(mktemp)
# Rewrite in place through a temporary copy: `cat >` keeps the files' owner, mode and inode.
awk -F: -v OFS=: -v u="$devcell_user" -v uid="$devcell_new_uid" -v gid="$devcell_new_gid" \
    '$1 == u { $3 = uid; $4 = gid } { print }' /etc/passwd > "$devcell_tmp"
cat "$devcell_tmp" > /etc/passwd
if [ "$devcell_old_gid" != "$devcell_new_gid" ] && [ -f /etc/group ]; then
    awk -F: -v OFS=: -v old="$devcell_old_gid" -v new="$devcell_new_gid" \
        '$3 == old { $3 = new } { print }' /etc/group > "$devcell_tmp"
    cat "$devcell_tmp" > /etc/group
fi
rm -f "$devcell_tmp"
if [ -n "$devcell_home" ] && [ "$devcell_home" != / ] && [ -d "$devcell_home" ]; then
    chown -R "$devcell_new_uid:$devcell_new_gid" "$devcell_home"
fi
echo "devcell: user $devcell_user now has UID $devcell_new_uid and GID $devcell_new_gid"
