#!/usr/bin/env bash
# What the tests need beside node_modules: nats-server (the cluster tests start their own) and
# Chromium (the dashboard's browser tests). Debian's packages are installed when missing.
set -euo pipefail
missing=()
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "${missing[*]} missing: installing Debian's packages" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null
else
  echo "${missing[*]} missing: install them (Debian/Ubuntu: sudo apt-get install -y ${missing[*]}) to run the cluster and browser tests" >&2
fi
