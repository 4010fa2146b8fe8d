#!/usr/bin/env bash
# Checks deploy/kubernetes and deploy/kubernetes/postgres with no API server:
# decodes every manifest strictly into the k8s.io/api types (unknown,
# duplicate or mis-cased fields fail) and asserts the agenthooks sidecar (the
# image's entrypoint, no shell), its probes (liveness and readiness on their
# own health services), socket volume, socket mode and group (0660 or
# narrower, a pod group the agent shares), security context, resources,
# store (several replicas only on PostgreSQL, its password only from a
# Secret, TLS), Secret, ConfigMap and disruption budget (manifests_test.go). Modules come from the Go module proxy, pinned by go.mod
# and go.sum. Prints one line on success.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH="${PATH}:/usr/local/go/bin"
fi
command -v go >/dev/null || {
  echo "k8s check: go is not installed (needs Go 1.26 or a Go that can fetch it: GOTOOLCHAIN=auto)" >&2
  exit 1
}

# Module downloads and the build are bounded; the tests take well under a second.
timeout 300 go mod download
timeout 300 go vet ./...
timeout 300 go test -count=1 ./...
