#!/bin/sh
# Runs inside a container built with the `agent-user` Feature at its defaults
# (`devcontainer features test` layout). Exits non-zero on the first failed check.
set -eu
check() {
    label="$1"
    shift
    if "$@"; then echo "ok: $label"; else echo "FAILED: $label" >&2; exit 1; fi
}
check "user agent exists" id agent
check "uid is 1000" test "$(id -u agent)" = 1000
check "gid is 1000" test "$(id -g agent)" = 1000
check "home exists" test -d /home/agent
check "home owned by agent" test "$(stat -c %u /home/agent)" = 1000
check "not root" test "$(id -u agent)" != 0
