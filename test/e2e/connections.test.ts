import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { healthClient, unary } from '../support/grpc-client.js';
import { killSidecar, type SidecarProcess, startSidecar } from '../support/sidecar.js';

/** The HTTP/2 client connection preface (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** A raw TCP client that records what the server does. */
interface RawConnection {
  readonly socket: net.Socket;
  /** Bytes received so far. */
  bytes(): number;
  /** Resolves when the server has sent something. */
  readonly firstData: Promise<void>;
  /** Resolves with the time (ms since connect) the connection closed. */
  readonly closed: Promise<number>;
  isClosed(): boolean;
}

function openRaw(address: string): Promise<RawConnection> {
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(i + 1));
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let received = 0;
    let isClosed = false;
    let start = 0;
    let onFirst: () => void = () => {};
    const firstData = new Promise<void>((r) => {
      onFirst = r;
    });
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      onFirst();
    });
    socket.on('error', () => {});
    const closed = new Promise<number>((r) =>
      socket.once('close', () => {
        isClosed = true;
        r(Date.now() - start);
      }),
    );
    socket.once('connect', () => {
      start = Date.now();
      resolve({
        socket,
        bytes: () => received,
        firstData,
        closed,
        isClosed: () => isClosed,
      });
    });
    socket.once('error', reject);
  });
}

/** Resolves with `promise`, or fails the test after `ms`. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** An HTTP/2 frame (RFC 9113 §4.1). */
function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header.writeUInt8(type, 3);
  header.writeUInt8(flags, 4);
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** A header block of literal fields without indexing (RFC 7541 §6.2.2), names and values short. */
function headerBlock(fields: [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    parts.push(Buffer.from([0, name.length]), Buffer.from(name), Buffer.from([value.length]));
    parts.push(Buffer.from(value));
  }
  return Buffer.concat(parts);
}

const SETTINGS = frame(4, 0, 0, Buffer.alloc(0));
const END_STREAM = 0x1;
const END_HEADERS = 0x4;
const HEADERS = 1;
const PING = 6;
const GOAWAY = 7;
const ACK = 0x1;

/** The request headers of a gRPC health check. */
const HEALTH_BLOCK = headerBlock([
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', '/grpc.health.v1.Health/Check'],
  [':authority', 'localhost'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
]);

/** The start of a gRPC health check whose body never completes. */
const HEALTH_CHECK_HEADERS = frame(1, END_HEADERS, 1, HEALTH_BLOCK);

/** Writes one byte every 100 ms until the connection closes. */
function trickle(conn: RawConnection, byte: () => Buffer): void {
  const timer = setInterval(() => {
    if (conn.isClosed()) clearInterval(timer);
    else conn.socket.write(byte());
  }, 100);
  conn.closed.then(() => clearInterval(timer));
}

/** Opens `n` connections, a few at a time. */
async function openMany(address: string, n: number): Promise<RawConnection[]> {
  const conns: RawConnection[] = [];
  for (let i = 0; i < n; i += 25) {
    conns.push(
      ...(await Promise.all(Array.from({ length: Math.min(25, n - i) }, () => openRaw(address)))),
    );
  }
  return conns;
}

async function healthCheck(address: string): Promise<string> {
  const client = healthClient(address);
  try {
    const res = await unary<{ status: string }>(client, 'Check', { service: '' });
    return res.status;
  } finally {
    client.close();
  }
}

describe('idle and slow connections', () => {
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    sidecar = await startSidecar({
      args: [
        '--health-listen',
        '127.0.0.1:0',
        '--handshake-timeout',
        '1',
        '--request-timeout',
        '2',
        '--idle-timeout',
        '3',
        '--keepalive-time',
        '1',
        '--max-connections',
        '400',
      ],
    });
  });
  afterAll(() => killSidecar(sidecar));

  it('closes idle, preface-only and trickling connections on every listener while answering others', async () => {
    const grpcAddress = sidecar.grpc;
    const healthAddress = sidecar.health as string;
    const httpAddress = sidecar.http as string;
    const idle = [
      ...(await openMany(grpcAddress, 100)),
      ...(await openMany(healthAddress, 100)),
      ...(await openMany(httpAddress, 100)),
    ];
    const prefaceOnly = [
      ...(await openMany(grpcAddress, 10)),
      ...(await openMany(healthAddress, 10)),
    ];
    for (const c of prefaceOnly) c.socket.write(PREFACE);
    const httpHeadersOnly = await openMany(httpAddress, 10);
    for (const c of httpHeadersOnly) c.socket.write('GET /healthz HTTP/1.1\r\nhost: x\r\n');
    const grpcTrickling = await openMany(grpcAddress, 10);
    for (const c of grpcTrickling) {
      c.socket.write(Buffer.concat([PREFACE, SETTINGS, HEALTH_CHECK_HEADERS]));
      trickle(c, () => frame(0, 0, 1, Buffer.from([0])));
    }
    const httpTrickling = await openMany(httpAddress, 10);
    for (const c of httpTrickling) {
      c.socket.write('POST /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n');
      trickle(c, () => Buffer.from('x'));
    }

    // A well-behaved client is answered on every listener meanwhile.
    expect(await healthCheck(grpcAddress)).toBe('SERVING');
    expect(await healthCheck(healthAddress)).toBe('SERVING');
    const healthz = await fetch(`http://${httpAddress}/healthz`);
    expect(healthz.status).toBe(200);
    await healthz.body?.cancel();

    // --handshake-timeout 1: nothing sent, or no complete request head, within a second.
    const idleClosed = await within(
      8_000,
      'idle connections closed',
      Promise.all([...idle, ...httpHeadersOnly].map((c) => c.closed)),
    );
    expect(Math.min(...idleClosed)).toBeGreaterThanOrEqual(900);
    // An HTTP/2 preface and nothing more: the unanswered keepalive ping (1 s + 1 s) or
    // --idle-timeout 3 ends it.
    await within(
      8_000,
      'preface-only connections closed',
      Promise.all(prefaceOnly.map((c) => c.closed)),
    );
    // A call whose body never ends: the unanswered keepalive ping ends it.
    await within(8_000, 'trickling gRPC closed', Promise.all(grpcTrickling.map((c) => c.closed)));
    // --request-timeout 2: the body is still arriving after two seconds.
    const trickled = await within(
      8_000,
      'trickling HTTP closed',
      Promise.all(httpTrickling.map((c) => c.closed)),
    );
    expect(Math.min(...trickled)).toBeGreaterThanOrEqual(1_900);

    expect(await healthCheck(grpcAddress)).toBe('SERVING');
  });
});

/**
 * Flags of a sidecar with a probe listener, `cap` connections at most and
 * timeouts (handshake, request, idle, keepalive) of a minute: only what a
 * test looks at can close a connection promptly.
 */
function withLongTimeouts(cap: number): string[] {
  const flags = ['--health-listen', '127.0.0.1:0', '--max-connections', String(cap)];
  for (const timeout of [
    'handshake-timeout',
    'request-timeout',
    'idle-timeout',
    'keepalive-time',
  ]) {
    flags.push(`--${timeout}`, '60');
  }
  return flags;
}

describe('the connection cap', () => {
  const CAP = 20;
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    // Long timeouts: only the cap can close a connection promptly here.
    sidecar = await startSidecar({
      args: withLongTimeouts(CAP),
    });
  });
  afterAll(() => killSidecar(sidecar));

  /** Opens a gRPC connection and resolves once the server answered its preface. */
  async function openHttp2(address: string): Promise<RawConnection> {
    const c = await openRaw(address);
    c.socket.write(Buffer.concat([PREFACE, SETTINGS]));
    await Promise.race([c.firstData, c.closed]);
    return c;
  }

  /** Opens an HTTP/1.1 keep-alive connection and resolves once a request on it was answered. */
  async function openHttp1(address: string): Promise<RawConnection> {
    const c = await openRaw(address);
    c.socket.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    await Promise.race([c.firstData, c.closed]);
    return c;
  }

  it.each(['grpc', 'health', 'http'] as const)(
    'closes connections past --max-connections on the %s listener at once, and accepts again below it',
    async (listener) => {
      const address = sidecar[listener] as string;
      const open = listener === 'http' ? openHttp1 : openHttp2;
      // On the gRPC listener a well-behaved client holds one of the connections.
      const client = listener === 'grpc' ? healthClient(address) : undefined;
      try {
        if (client !== undefined) {
          expect(await unary<{ status: string }>(client, 'Check', {})).toMatchObject({
            status: 'SERVING',
          });
        }
        const held: RawConnection[] = [];
        while (held.length < CAP - (client === undefined ? 0 : 1)) {
          const c = await open(address);
          expect(c.bytes()).toBeGreaterThan(0);
          held.push(c);
        }
        const extra = await open(address);
        const closedAfter = await within(5_000, 'connection past the cap closed', extra.closed);
        expect(extra.bytes()).toBe(0);
        expect(closedAfter).toBeLessThan(5_000);
        if (client !== undefined) {
          expect(await unary<{ status: string }>(client, 'Check', {})).toMatchObject({
            status: 'SERVING',
          });
        }
        // One leaves: a new connection is accepted once the server has seen it go.
        const leaving = held.pop() as RawConnection;
        leaving.socket.destroy();
        let accepted: RawConnection | undefined;
        for (let attempt = 0; attempt < 50 && accepted === undefined; attempt++) {
          const c = await open(address);
          if (c.bytes() > 0) accepted = c;
        }
        expect(accepted).toBeDefined();
        for (const c of [...held, accepted as RawConnection]) c.socket.destroy();
      } finally {
        client?.close();
      }
    },
  );
});

/** The sockets a process holds open, from its file descriptors (Linux `/proc`). */
function openSockets(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++;
    } catch {
      // Closed between the listing and the read.
    }
  }
  return n;
}

/** Resolves once `check()` holds, polling every 50 ms; fails after `ms`. */
async function until(ms: number, what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('stream reset floods', () => {
  const CAP = 10;
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    // Long timeouts and keepalive: only the server's own reaction can free a connection here.
    sidecar = await startSidecar({
      args: withLongTimeouts(CAP),
    });
  });
  afterAll(() => killSidecar(sidecar));

  /** A health Check and its cancel (RST_STREAM CANCEL) on stream `id`. */
  function checkAndReset(id: number): Buffer {
    const headers = Buffer.from(HEALTH_CHECK_HEADERS);
    headers.writeUInt32BE(id, 5);
    return Buffer.concat([headers, frame(3, 0, id, Buffer.from([0, 0, 0, 8]))]);
  }

  /**
   * Sends the preface, SETTINGS and `pairs` Check + RST_STREAM pairs (past
   * nghttp2's 1000 at once) in batches of 100, each followed by a PING whose
   * ACK paces the next; stops at the server's GOAWAY or close, then closes.
   */
  async function rapidReset(address: string, pairs: number): Promise<void> {
    const c = await openRaw(address);
    let received = Buffer.alloc(0);
    let acks = 0;
    let goaway = false;
    let onFrame: () => void = () => {};
    c.socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      while (received.length >= 9 && received.length >= 9 + received.readUIntBE(0, 3)) {
        const type = received.readUInt8(3);
        if (type === PING && (received.readUInt8(4) & ACK) !== 0) acks++;
        if (type === GOAWAY) goaway = true;
        received = received.subarray(9 + received.readUIntBE(0, 3));
      }
      onFrame();
    });
    c.socket.write(Buffer.concat([PREFACE, SETTINGS]));
    for (let i = 0; i < pairs && !goaway && !c.isClosed(); i += 100) {
      const batch = Array.from({ length: Math.min(100, pairs - i) }, (_, j) =>
        checkAndReset(1 + 2 * (i + j)),
      );
      c.socket.write(Buffer.concat([...batch, frame(PING, 0, 0, Buffer.alloc(8))]));
      const want = acks + 1;
      await Promise.race([
        c.closed,
        new Promise<void>((resolve) => {
          onFrame = () => {
            if (acks >= want || goaway) resolve();
          };
        }),
      ]);
    }
    c.socket.destroy();
    await c.closed;
  }

  it('releases a connection nghttp2 gave up on after resets of a stream already answered', async () => {
    const address = sidecar.grpc;
    const baseline = openSockets(sidecar.pid);
    const c = await openRaw(address);
    let received = Buffer.alloc(0);
    let answered = false;
    let goaway = false;
    let onFrame: () => void = () => {};
    c.socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      while (received.length >= 9 && received.length >= 9 + received.readUIntBE(0, 3)) {
        const type = received.readUInt8(3);
        if (type === HEADERS && (received.readUInt8(4) & END_STREAM) !== 0) answered = true;
        if (type === GOAWAY) goaway = true;
        received = received.subarray(9 + received.readUIntBE(0, 3));
      }
      onFrame();
    });
    const wait = (check: () => boolean) =>
      new Promise<void>((resolve) => {
        onFrame = () => {
          if (check()) resolve();
        };
      });
    // A Check with no message: answered, and stream 1 closed on both sides.
    c.socket.write(
      Buffer.concat([PREFACE, SETTINGS, frame(HEADERS, END_HEADERS | END_STREAM, 1, HEALTH_BLOCK)]),
    );
    await within(
      5_000,
      'Check answered',
      wait(() => answered),
    );
    // nghttp2 counts each reset, of a closed stream too, and past 1000 sends GOAWAY.
    const resets = Array.from({ length: 1_100 }, () => frame(3, 0, 1, Buffer.from([0, 0, 0, 8])));
    c.socket.write(Buffer.concat(resets));
    await within(
      5_000,
      'GOAWAY',
      wait(() => goaway),
    );
    c.socket.destroy();
    await c.closed;
    await within(
      16_000,
      'socket released',
      until(16_000, 'socket released', () => openSockets(sidecar.pid) <= baseline),
    );
    expect(await healthCheck(address)).toBe('SERVING');
  }, 20_000);

  it.each(['health', 'grpc'] as const)(
    'releases the connections of a rapid-reset flood on the %s listener at once, and answers after it',
    async (listener) => {
      const address = sidecar[listener] as string;
      const baseline = openSockets(sidecar.pid);
      await within(
        20_000,
        'flood sent',
        Promise.all(Array.from({ length: CAP }, () => rapidReset(address, 1_500))),
      );
      // Every flooding client is gone: the sidecar holds no socket of theirs.
      await within(
        5_000,
        'sockets released',
        until(5_000, 'sockets released', () => openSockets(sidecar.pid) <= baseline),
      );
      expect(await healthCheck(address)).toBe('SERVING');
    },
  );
});

describe('pipelined /metrics', () => {
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    sidecar = await startSidecar({ http: false, args: ['--metrics-listen', '127.0.0.1:0'] });
  });
  afterAll(() => killSidecar(sidecar));

  /** The resident memory of a process, in bytes (Linux `/proc`). */
  function rss(pid: number): number {
    const line = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(line?.[1]) * 1024;
  }

  it('answers the first of a pipelined /metrics burst, then closes the connection, holding no queue', async () => {
    const before = rss(sidecar.pid);
    const c = await openRaw(sidecar.metrics as string);
    // The client reads nothing while it sends: Node keeps no output back to throttle it by.
    c.socket.pause();
    const burst = Buffer.from('GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n'.repeat(5_000));
    await new Promise<void>((resolve) => c.socket.write(burst, () => resolve()));
    let text = '';
    c.socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    c.socket.resume();
    await within(5_000, 'connection closed after the first answer', c.closed);
    expect(text.match(/HTTP\/1\.1 200 /g)).toHaveLength(1);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(text).toContain('agenthooks_rpc_calls_total');
    expect(rss(sidecar.pid) - before).toBeLessThan(64 * 1024 * 1024);
    // A scraper's next request, on a new connection, is answered.
    const metrics = await fetch(`http://${sidecar.metrics}/metrics`);
    expect(metrics.status).toBe(200);
    await metrics.body?.cancel();
  });
});

describe('the probe listener', () => {
  const CAP = 20;
  let sidecar: SidecarProcess;
  beforeAll(async () => {
    // Long timeouts: on the API listener a silent connection stays for a minute.
    sidecar = await startSidecar({
      args: withLongTimeouts(CAP),
    });
  });
  afterAll(() => killSidecar(sidecar));

  it('closes silent connections within seconds, so a flood of them cannot keep kubelet out', async () => {
    const health = sidecar.health as string;
    // Half send the preface and SETTINGS (answered), half nothing at all.
    const silent = await openMany(health, CAP);
    for (const c of silent.slice(0, CAP / 2)) c.socket.write(Buffer.concat([PREFACE, SETTINGS]));
    await Promise.all(silent.slice(0, CAP / 2).map((c) => c.firstData));
    const api = await openRaw(sidecar.grpc);
    api.socket.write(Buffer.concat([PREFACE, SETTINGS]));
    await api.firstData;

    // 5 s, with room for a loaded machine; far from the listener's --idle-timeout of 60 s.
    const closedAfter = await within(
      15_000,
      'silent probe-port connections closed',
      Promise.all(silent.map((c) => c.closed)),
    );
    expect(Math.max(...closedAfter)).toBeLessThan(15_000);
    expect(await healthCheck(health)).toBe('SERVING');
    // The API listener keeps its own --idle-timeout.
    expect(api.isClosed()).toBe(false);
    api.socket.destroy();
  });
});
