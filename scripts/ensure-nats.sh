#!/usr/bin/env bash
# The cluster tests start their own nats-server; install Debian's package when it is missing.
set -euo pipefail
command -v nats-server >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "nats-server is missing: installing Debian's package" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server) >/dev/null
else
  echo "nats-server is missing: install it (Debian/Ubuntu: sudo apt-get install -y nats-server) to run the cluster tests" >&2
fi
