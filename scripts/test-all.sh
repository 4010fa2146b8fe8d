#!/usr/bin/env bash
# The README's test command: runs the whole test suite on a fresh machine.
# It installs what the tests need beyond `npm ci` when missing (each step is
# skipped when already done): Debian's PostgreSQL server binaries (for the
# PostgreSQL user-directory tests; needs root or sudo-less apt), the pinned
# Python and Go client toolchains (for the example runtimes), then builds
# and runs vitest. Extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "test-all: installing postgresql (Debian)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
fi
scripts/install-client-tools.sh
npm run --silent build
exec npx --no-install vitest run "$@"
