#!/usr/bin/env bash
# The README's test command: runs the whole test suite on a fresh machine.
# It installs what the tests need beyond `npm ci` when missing (each step is
# skipped when already done): Debian's PostgreSQL server binaries (for the
# PostgreSQL user-directory tests; needs root or sudo-less apt), the pinned
# Python and Go client toolchains (for the example runtimes), Debian's
# chromium and prometheus (promtool) for the operator-view tests, search
# permission on the checkout's folders for the tests' unprivileged user (as
# root), then builds and runs vitest. Extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "test-all: installing postgresql (Debian)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
fi
# Run as root, some tests start the sidecar as an unprivileged user
# (setpriv), as a pod runs it, and that user must reach the checkout's dist/
# and node_modules/. A clone inside a private folder (`mktemp -d` makes 0700
# ones) would hide it: give each ancestor that lacks it search permission for
# others (o+x), which lets a path through without making anything listable
# or readable, and say so.
if [ "$(id -u)" -eq 0 ]; then
  dir="$(pwd -P)"
  while [ "${dir}" != "/" ]; do
    if [ -z "$(find "${dir}" -maxdepth 0 -perm -o+x)" ]; then
      echo "test-all: chmod o+x ${dir} (the tests' unprivileged user must reach the checkout)" >&2
      chmod o+x "${dir}"
    fi
    dir="$(dirname "${dir}")"
  done
fi
scripts/install-client-tools.sh
# Chromium (admin console tests) and promtool (alert rules tests), from Debian.
scripts/install-operator-tools.sh
npm run --silent build
# The Vercel AI SDK adapter (integrations/ts/dist), which its tests run.
npm run --silent build:integrations
exec npx --no-install vitest run "$@"
