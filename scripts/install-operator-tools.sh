#!/usr/bin/env bash
# Installs the Debian packages the operator-view tests need:
#   - chromium: the headless browser the admin console tests drive over the
#     DevTools protocol (puppeteer-core, pinned in package.json);
#   - prometheus: for its promtool, which checks and unit-tests the alert
#     rules of deploy/kubernetes/prometheus-rules.yaml.
# Idempotent: nothing is installed when both commands are already on PATH.
# Needs root and apt (Debian bookworm); CI runs as root.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
apt-get update -qq
# policy-rc.d-free container: the prometheus package's service is not started
# without an init system; only its promtool binary is used.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
