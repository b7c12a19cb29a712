#!/bin/sh
# Runs inside a container built with the `packages` Feature at its defaults (an empty list):
# the Feature must have changed nothing and succeeded.
set -eu
echo "ok: packages with an empty list installs nothing"
