#!/usr/bin/env bash
# Installs the load generators of `npm run bench` at pinned versions into
# bench/.tools/bin (gitignored), from the Go module proxy:
#   - ghz (gRPC, closed and open loop, unary and bidi streams);
#   - vegeta (HTTP: Connect JSON, open loop).
# Both are Go programs, so the client side of a bench run is never the Node
# process under test and never the bottleneck of a Node server.
# Idempotent: a tool already at its pinned version is kept.
# Needs go (1.26 or newer) on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

GHZ_VERSION=v0.120.0
VEGETA_VERSION=v12.13.0

bin="$(pwd)/bench/.tools/bin"
mkdir -p "${bin}"
stamp="${bin}/.versions"
want="ghz ${GHZ_VERSION} vegeta ${VEGETA_VERSION}"
if [ -x "${bin}/ghz" ] && [ -x "${bin}/vegeta" ] && [ "$(cat "${stamp}" 2>/dev/null)" = "${want}" ]; then
  exit 0
fi
GOBIN="${bin}" go install "github.com/bojand/ghz/cmd/ghz@${GHZ_VERSION}"
GOBIN="${bin}" go install "github.com/tsenart/vegeta/v12@${VEGETA_VERSION}"
echo "${want}" >"${stamp}"
