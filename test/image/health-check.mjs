#!/usr/bin/env node
/**
 * Polls `grpc.health.v1.Health/Check` until it answers SERVING, a bounded
 * number of times. Uses @grpc/grpc-js and @grpc/proto-loader from the repo's
 * node_modules and proto/grpc/health/v1/health.proto.
 *
 * Usage: node test/image/health-check.mjs TARGET [ATTEMPTS] [INTERVAL_MS] [SERVICE]
 *   TARGET    a gRPC target: 127.0.0.1:50052 or unix:/path/to.sock
 *   ATTEMPTS  how many Check calls at most (default 60)
 *   INTERVAL  milliseconds between attempts (default 500)
 *   SERVICE   the service name to check (default "", the whole server)
 *
 * Exits 0 on SERVING, 1 when the attempts run out (the last error or status
 * is printed), 2 on bad usage.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const [target, attemptsArg = '60', intervalArg = '500', service = ''] = process.argv.slice(2);
const attempts = Number(attemptsArg);
const intervalMs = Number(intervalArg);
if (target === undefined || !(attempts > 0) || !(intervalMs >= 0)) {
  process.stderr.write('usage: health-check.mjs TARGET [ATTEMPTS] [INTERVAL_MS] [SERVICE]\n');
  process.exit(2);
}

const protoDir = fileURLToPath(new URL('../../proto/', import.meta.url));
const definition = protoLoader.loadSync('grpc/health/v1/health.proto', {
  includeDirs: [protoDir],
  enums: String,
});
const { Health } = grpc.loadPackageDefinition(definition).grpc.health.v1;
const client = new Health(target, grpc.credentials.createInsecure());

/** One Check call with a 2 s deadline; resolves to the status name or an error text. */
function check() {
  return new Promise((resolve) => {
    client.check({ service }, { deadline: Date.now() + 2000 }, (err, res) => {
      resolve(err ? `error: ${err.code} ${err.details}` : res.status);
    });
  });
}

let last = 'no answer';
for (let i = 1; i <= attempts; i++) {
  last = await check();
  if (last === 'SERVING') {
    client.close();
    process.exit(0);
  }
  if (i < attempts) await new Promise((r) => setTimeout(r, intervalMs));
}
client.close();
process.stderr.write(`health-check: ${target} not SERVING after ${attempts} attempts: ${last}\n`);
process.exit(1);
