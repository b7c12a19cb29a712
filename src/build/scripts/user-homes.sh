# Appends _CONTAINER_USER_HOME and _REMOTE_USER_HOME to the builtin env file, looking the
# users up in the image being built (getent when present, else /etc/passwd by name, or by
# uid for numeric users). An unknown user gets an empty home. Written by devcell.
set -e
cd /tmp/dev-container-features
. ./devcontainer-features.builtin.env
devcell_home_of() {
    devcell_name=${1%%:*}
    devcell_home=
    if command -v getent >/dev/null 2>&1; then
        devcell_home=$(getent passwd "$devcell_name" 2>/dev/null | cut -d: -f6) || devcell_home=
    fi
    if [ -z "$devcell_home" ] && [ -r /etc/passwd ]; then
        case "$devcell_name" in
            '' | *[!0-9]*) devcell_field=1 ;;
            *) devcell_field=3 ;;
        esac
        devcell_home=$(awk -F: -v key="$devcell_name" -v field="$devcell_field" \
            '$field == key { print $6; exit }' /etc/passwd) || devcell_home=
    fi
    printf '%s' "$devcell_home"
}
devcell_quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}
{
    printf '_CONTAINER_USER_HOME=%s\n' "$(devcell_quote "$(devcell_home_of "$_CONTAINER_USER")")"
    printf '_REMOTE_USER_HOME=%s\n' "$(devcell_quote "$(devcell_home_of "$_REMOTE_USER")")"
} >> devcontainer-features.builtin.env
