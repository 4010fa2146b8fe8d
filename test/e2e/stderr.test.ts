/**
 * Stderr holds only JSON lines, without secrets: grpc-js's own messages
 * (a refused header, quoted with its value; a port already taken) go
 * through the sidecar's logger and its redaction.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import {
  killSidecar,
  MAIN_JS,
  type SidecarProcess,
  startSidecar,
  tempDbPath,
} from '../support/sidecar.js';

const SECRET = 'token-secret-123';

/** Parses each line as JSON; a line that is not JSON is returned as text. */
function parseLines(lines: readonly string[]): (Record<string, unknown> | string)[] {
  return lines.map((line) => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      return line;
    }
  });
}

describe('stderr', () => {
  let sidecar: SidecarProcess | undefined;

  afterEach(async () => {
    await killSidecar(sidecar);
  });

  it('logs a refused authorization header as JSON without its token', async () => {
    sidecar = await startSidecar({ http: false });
    // grpc-js clients refuse to send a TAB in a value, so the call is raw HTTP/2.
    const session = http2.connect(`http://${sidecar.grpc}`);
    const request = session.request({
      ':method': 'POST',
      ':path': '/agenthooks.v1.HookService/DecideToolCall',
      'content-type': 'application/grpc',
      te: 'trailers',
      authorization: `Bearer\t${SECRET}`,
    });
    request.end(Buffer.from([0, 0, 0, 0, 0])); // one empty, uncompressed message
    request.resume();
    await once(request, 'close');
    session.close();
    const line = await sidecar.waitForLog((l) => l.source === 'grpc-js');
    expect(line).toMatchObject({ level: 'error' });
    expect(String(line.msg)).toContain('metadata entry authorization: [redacted]');
    expect(sidecar.logs.filter((l) => l.raw === true)).toEqual([]);
    expect(JSON.stringify(sidecar.logs)).not.toContain(SECRET);
  });

  it('logs a taken port as JSON lines only, and exits 1', async () => {
    const taken = net.createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const { port } = taken.address() as net.AddressInfo;
    const db = tempDbPath();
    try {
      const child = spawn(
        process.execPath,
        [
          MAIN_JS,
          'serve',
          '--grpc-listen',
          `127.0.0.1:${port}`,
          '--http-listen',
          'off',
          '--admin-listen',
          'off',
          '--db',
          db,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      const lines: string[] = [];
      createInterface({ input: child.stderr }).on('line', (l) => lines.push(l));
      const [code] = (await once(child, 'close')) as [number];
      expect(code).toBe(1);
      // The failed start removed the database it had created.
      expect(existsSync(db)).toBe(false);
      const parsed = parseLines(lines);
      expect(parsed.filter((l) => typeof l === 'string')).toEqual([]);
      const records = parsed as Record<string, unknown>[];
      expect(records.find((l) => l.msg === 'failed to start')).toMatchObject({ level: 'error' });
      // The listener's own error says which address was taken.
      expect(JSON.stringify(records.find((l) => l.msg === 'failed to start'))).toMatch(
        /EADDRINUSE/,
      );
    } finally {
      taken.close();
    }
  });
});
