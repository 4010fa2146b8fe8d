#!/usr/bin/env bash
# Installs the pinned toolchain of the Python and Go clients into .venv
# (gitignored), and the Go modules of clients/go, examples/go and
# integrations/go (the Vercel AI SDK adapter's `ai` is an npm dev dependency,
# installed by npm ci):
#   - a Python venv with clients/python/requirements.txt (grpcio-tools,
#     grpcio, protobuf, googleapis-common-protos, grpcio-status for the
#     example runtime's error details, and standardwebhooks for the
#     signed-webhooks receiver check), from PyPI;
#   - protoc-gen-go and protoc-gen-go-grpc at the versions of
#     clients/versions.env, from the Go module proxy, into .venv/bin.
# Idempotent: whatever is already there at the pinned version is kept.
# Last, scripts/install-python-integrations.sh installs the Python framework
# adapters (integrations/python) with their pinned frameworks.
# With --generators-only (as scripts/generate-clients.sh runs it) it installs
# the code generators and leaves the Go modules and build alone.
# Needs python3 (3.11 or newer: grpcio 1.85.1 needs 3.10, the framework
# adapters 3.11) and go (1.26 or newer) on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../clients/versions.env
source clients/versions.env

venv=.venv
bin="$(pwd)/${venv}/bin"

# The stamp records which requirements.txt the venv was installed from.
stamp="${venv}/.agenthooks-requirements.sha256"
if [ ! -x "${bin}/python" ]; then
  rm -f "${stamp}"
  python3 -m venv "${venv}"
fi
want="$(sha256sum clients/python/requirements.txt | cut -d' ' -f1)"
if [ "$(cat "${stamp}" 2>/dev/null)" != "${want}" ]; then
  "${bin}/pip" install --quiet --disable-pip-version-check -r clients/python/requirements.txt
  echo "${want}" >"${stamp}"
fi

if [ "$("${bin}/protoc-gen-go" --version 2>/dev/null)" != "protoc-gen-go ${PROTOC_GEN_GO_VERSION}" ]; then
  GOBIN="${bin}" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
# protoc-gen-go-grpc prints its version without the leading v.
if [ "$("${bin}/protoc-gen-go-grpc" --version 2>/dev/null)" != "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}" ]; then
  GOBIN="${bin}" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"
fi

if [ "${1:-}" = "--generators-only" ]; then
  exit 0
fi

# The modules that the Go client and the Go example build with (go.sum pins
# them); building the example once fills the build cache, so that the examples
# test builds it in about a second.
go -C clients/go mod download
go -C examples/go mod download
go -C examples/go build -o /dev/null .
# The langchaingo adapter (integrations/go, github.com/tmc/langchaingo
# v0.1.14 pinned by its go.sum): its modules, and one build of its canonical
# runner to fill the build cache for test/integrations.
go -C integrations/go mod download
go -C integrations/go build -o /dev/null ./cmd/canonical
# The README test runs `go mod tidy` offline in a new module that uses the
# adapter. Tidy also reads the tests of the packages it imports (grpc's import
# gonum, for one), whose modules `mod download` leaves out: a tidy check here
# fetches them (and fails if the adapter's go.mod is not tidy).
go -C integrations/go mod tidy -diff

# The Python framework adapters and their pinned frameworks (integrations/python).
scripts/install-python-integrations.sh
