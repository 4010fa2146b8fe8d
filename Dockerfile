# syntax=docker/dockerfile:1
# agenthooks sidecar image.
#
# Node 20 is pinned through NODE_IMAGE (a Debian bookworm based Node 20 image:
# it needs sh, and apt-get unless python3, make and g++ are already there).
# better-sqlite3 is a native module, so the build and runtime stages use the
# same base. test/image/build-and-run.sh builds this file from a locally
# assembled base with --build-arg NODE_IMAGE=localhost/agenthooks-node-base:20.
#
# The runtime stage runs as UID/GID 10001 (numeric, so Kubernetes can verify
# runAsNonRoot) and writes only to /var/lib/agenthooks (the SQLite database,
# a volume) and to the folder of a unix socket, if one is configured: it works
# with a read-only root filesystem.
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_AUDIT=false \
    NPM_CONFIG_FUND=false
# Compilers for better-sqlite3, unless the base already has them.
RUN if command -v python3 >/dev/null && command -v make >/dev/null && command -v g++ >/dev/null; then \
      echo "python3, make and g++ found in the base"; \
    else \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++ \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY package.json package-lock.json ./
# node-gyp uses the headers that come with the base's Node when it has them
# (no download of the headers).
RUN prefix="$(dirname "$(dirname "$(command -v node)")")"; \
    if [ -f "${prefix}/include/node/common.gypi" ]; then export npm_config_nodedir="${prefix}"; fi; \
    npm ci
COPY tsconfig.json tsconfig.build.json ./
# `npm run build` bundles dist/src/main.js with it (esbuild, a devDependency).
COPY scripts/bundle.mjs ./scripts/bundle.mjs
# gen/ also holds descriptors.binpb (server reflection with the proto
# comments), which `npm run build` copies into dist/gen/ for the runtime stage.
COPY gen ./gen
COPY src ./src
RUN npm run build \
 && rm -f dist/src/main.js.map \
 && npm prune --omit=dev \
 && rm -rf /root/.npm

FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The data folder belongs to the runtime user, so a fresh volume mounted there
# (or the image's own folder) is writable.
RUN mkdir -p /var/lib/agenthooks && chown 10001:10001 /var/lib/agenthooks
# On 0.0.0.0 the API needs a token (AGENTHOOKS_AUTH_TOKEN_FILE or
# AGENTHOOKS_AUTH_TOKEN): without one the sidecar refuses to start, unless
# AGENTHOOKS_ALLOW_UNAUTHENTICATED=true (or the API is moved to a unix socket
# or loopback, as deploy/kubernetes does).
ENV NODE_ENV=production \
    AGENTHOOKS_GRPC_LISTEN=0.0.0.0:50051 \
    AGENTHOOKS_HTTP_LISTEN=0.0.0.0:8080 \
    AGENTHOOKS_HEALTH_LISTEN=0.0.0.0:50052 \
    AGENTHOOKS_DB=/var/lib/agenthooks/agenthooks.db
VOLUME ["/var/lib/agenthooks"]
# 50051: gRPC (HookService, health, reflection); 8080: Connect, gRPC-Web and
# /healthz, /livez, /readyz over HTTP/1.1; 50052: gRPC health only, for
# kubelet probes.
EXPOSE 50051 8080 50052
USER 10001:10001
STOPSIGNAL SIGTERM
# V8's default young generation: a small one (--max-semi-space-size=4) saved
# about 20 MiB of RSS but promoted short-lived objects, which cost 1.3-2x the
# CPU per call and the open-loop tail (see BENCHMARKS.md).
ENTRYPOINT ["node", "/app/dist/src/main.js"]
CMD ["serve"]
