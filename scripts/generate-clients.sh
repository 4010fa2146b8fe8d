#!/usr/bin/env bash
# Regenerates the Python and Go clients under clients/ from proto/agenthooks/v1
# (`npm run generate:clients`), with the pinned local tools that
# scripts/install-client-tools.sh puts in .venv; no remote plugin is used.
# TypeScript is `npm run generate` (gen/), unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-client-tools.sh --generators-only
export PATH="$(pwd)/.venv/bin:${PATH}"

# Python: grpcio-tools' protoc (buf's Python plugins are remote-only).
.venv/bin/python scripts/generate_python_client.py

# Go: buf with the local protoc-gen-go and protoc-gen-go-grpc plugins.
rm -rf clients/go/agenthooks
npx --no-install buf generate --template clients/buf.gen.clients.yaml --path proto/agenthooks
