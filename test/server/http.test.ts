import { createServer, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { answerFailure, prepend } from '../../src/server/http.js';

/** An iterator over `values` that records the calls it gets. */
function recording(values: number[]) {
  const calls: string[] = [];
  const it: AsyncIterator<number> = {
    next() {
      calls.push('next');
      const value = values.shift();
      return Promise.resolve(
        value === undefined ? { done: true, value: undefined } : { done: false, value },
      );
    },
    return(value?: unknown) {
      calls.push(`return ${String(value)}`);
      return Promise.resolve({ done: true, value: undefined });
    },
    throw(e?: unknown) {
      calls.push(`throw ${String(e)}`);
      return Promise.resolve({ done: true, value: undefined });
    },
  };
  return { it, calls };
}

describe('prepend', () => {
  it('yields the head, then the rest of the iterator', async () => {
    const { it: source } = recording([2, 3]);
    const seen: number[] = [];
    for await (const value of prepend(1, source)) seen.push(value);
    expect(seen).toEqual([1, 2, 3]);
  });

  it('hands return and throw to the iterator at once, before or after the head', async () => {
    const before = recording([2]);
    await prepend(1, before.it).return?.('early');
    expect(before.calls).toEqual(['return early']);

    const after = recording([2, 3]);
    const wrapped = prepend(1, after.it);
    expect(await wrapped.next()).toEqual({ done: false, value: 1 });
    await wrapped.return?.('late');
    expect(after.calls).toEqual(['return late']);

    const thrown = recording([2]);
    const failed = prepend(1, thrown.it);
    await failed.next();
    await failed.throw?.('write failed');
    expect(thrown.calls).toEqual(['throw write failed']);
  });
});

/** Serves one request: reads its body, then calls `fail` on the response. */
async function failingServer(fail: (res: ServerResponse) => void): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => fail(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** Posts `{}` to `server`, giving up after 10 s. */
function postTo(server: Server): Promise<Response> {
  const { port } = server.address() as AddressInfo;
  return fetch(`http://127.0.0.1:${port}/svc/Method`, {
    method: 'POST',
    body: '{}',
    signal: AbortSignal.timeout(10_000),
  });
}

describe('answerFailure', () => {
  const capture = () => {
    const lines: string[] = [];
    return { lines, logger: createLogger({ write: (line) => lines.push(line) }) };
  };

  it('answers 500 and logs once the body is read, not leaving the client waiting', async () => {
    const { lines, logger } = capture();
    const server = await failingServer((res) =>
      answerFailure(res, new URIError('URI malformed'), logger, 'svc/Method'),
    );
    try {
      const answer = await postTo(server);
      expect(answer.status).toBe(500);
      expect(await answer.text()).toBe('internal error\n');
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0] as string)).toMatchObject({
        level: 'error',
        msg: 'http request failed',
        rpc: 'svc/Method',
      });
    } finally {
      server.close();
    }
  });

  it('answers a pipelined call queued behind another, in its turn', async () => {
    const { lines, logger } = capture();
    let first: ServerResponse | undefined;
    const server = await failingServer((res) => {
      if (first === undefined) {
        first = res;
        return;
      }
      // Queued behind the first answer: this response has no socket yet.
      answerFailure(res, new Error('boom'), logger, 'svc/Second');
      first.end('first\n');
    });
    try {
      const { port } = server.address() as AddressInfo;
      const socket = connect(port, '127.0.0.1');
      let received = '';
      const done = new Promise<void>((resolve, reject) => {
        socket.on('data', (chunk: Buffer) => {
          received += chunk.toString('latin1');
          if (received.includes('internal error\n')) resolve();
        });
        socket.on('error', reject);
        socket.on('close', () => resolve());
      });
      const request = 'POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}';
      socket.write(request + request);
      await done;
      socket.destroy();
      expect(received).toContain('first\n');
      expect(received).toContain('HTTP/1.1 500');
      expect(lines).toHaveLength(1);
    } finally {
      server.close();
    }
  });

  it('closes the connection when the head is already sent', async () => {
    const { logger } = capture();
    const server = await failingServer((res) => {
      res.writeHead(200, { 'content-type': 'application/grpc-web+proto' });
      res.write('partial', () => answerFailure(res, new Error('boom'), logger, 'svc/Method'));
    });
    try {
      const answer = await postTo(server);
      expect(answer.status).toBe(200);
      // The body ends in an error, not in a wait for the rest.
      await expect(answer.text()).rejects.toThrow(/terminated/);
    } finally {
      server.close();
    }
  });
});
