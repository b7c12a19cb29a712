#!/bin/sh
# devcell Feature `packages`: installs distribution packages.
# Option `packages` arrives as PACKAGES (devcontainer-features.env): comma/space separated.
set -eu

fail() {
    echo "packages: $*" >&2
    exit 1
}

list="$(printf '%s' "${PACKAGES:-}" | tr ',\n\t' '   ')"
set -f
# shellcheck disable=SC2086 # word splitting of the list is intended; globbing is off
set -- $list
set +f
if [ "$#" -eq 0 ]; then
    echo "packages: no packages requested; nothing to do"
    exit 0
fi
for p in "$@"; do
    case "$p" in
        -* | *[!A-Za-z0-9.+_:=~-]*)
            fail "invalid package name '$p' (letters, digits and . + _ : = ~ - only; not starting with -)" ;;
    esac
done

[ "$(id -u)" = 0 ] || fail "must run as root (Features install as root)"

if command -v apt-get > /dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "$@"
    rm -rf /var/lib/apt/lists/*
elif command -v apk > /dev/null 2>&1; then
    apk add --no-cache "$@"
elif command -v dnf > /dev/null 2>&1; then
    dnf install -y "$@"
    dnf clean all
elif command -v microdnf > /dev/null 2>&1; then
    microdnf install -y "$@"
    microdnf clean all
elif command -v yum > /dev/null 2>&1; then
    yum install -y "$@"
    yum clean all
else
    fail "no supported package manager (apt-get, apk, dnf, microdnf, yum) found; cannot install: $*"
fi
echo "packages: installed $*"
