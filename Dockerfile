# syntax=docker/dockerfile:1
# agenthooks sidecar image. Node 20 is pinned through NODE_IMAGE; better-sqlite3
# is native, so the build and runtime stages use the same Node release.
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY gen ./gen
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
USER node
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/app/dist/src/main.js"]
CMD ["serve"]
