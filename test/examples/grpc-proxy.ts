/**
 * @module A recording gRPC proxy: an HTTP/2 (h2c) server that forwards every
 * stream to the sidecar unchanged and keeps what went through — the request
 * headers, each length-prefixed message in both directions and the final
 * status — so a test reads the sidecar's answers as the runtime got them,
 * whatever language the runtime is written in.
 */
import { once } from 'node:events';
import * as http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One gRPC call that went through the proxy. */
export interface ProxiedCall {
  /** Request path, such as `/agenthooks.v1.HookService/DecideToolCall`. */
  readonly path: string;
  /** Request headers as the client sent them (pseudo-headers included). */
  readonly requestHeaders: http2.IncomingHttpHeaders;
  /** Messages the client sent, decompressed. */
  readonly requests: Uint8Array[];
  /** Messages the sidecar answered, decompressed. */
  readonly responses: Uint8Array[];
  /** `grpc-status` of the call, once it ended; `undefined` while it runs. */
  grpcStatus?: number;
  /** `grpc-message` of the call, if any. */
  grpcMessage?: string;
  /** `grpc-status-details-bin` of the call, decoded from base64: a `google.rpc.Status`. */
  grpcStatusDetails?: Uint8Array;
  /** Resolves once both directions ended. */
  readonly ended: Promise<void>;
}

/** A running proxy. */
export interface GrpcProxy {
  /** `host:port` to give a runtime. */
  readonly address: string;
  /** Every call, in the order the calls started. */
  readonly calls: ProxiedCall[];
  close(): Promise<void>;
}

/** Splits a gRPC byte stream into messages, as they arrive in chunks. */
function messageReader(compressed: () => string | undefined, into: Uint8Array[]) {
  let buffered = Buffer.alloc(0);
  return (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 5) {
      const length = buffered.readUInt32BE(1);
      if (buffered.length < 5 + length) return;
      const flag = buffered[0];
      const body = buffered.subarray(5, 5 + length);
      if (flag === 1 && compressed() !== 'gzip') {
        throw new Error(`unsupported grpc-encoding ${compressed()}`);
      }
      into.push(new Uint8Array(flag === 1 ? gunzipSync(body) : body));
      buffered = buffered.subarray(5 + length);
    }
  };
}

/** Copies headers, leaving out the pseudo-headers that Node sets itself. */
function forwardable(headers: http2.IncomingHttpHeaders, keep: string[] = []) {
  const out: http2.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(':') && !keep.includes(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Starts a proxy on 127.0.0.1, port 0, that forwards to `upstream` (`host:port`). */
export async function startGrpcProxy(upstream: string): Promise<GrpcProxy> {
  const calls: ProxiedCall[] = [];
  const upstreams = new WeakMap<http2.ServerHttp2Session, http2.ClientHttp2Session>();
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    // One upstream connection per client connection, as a transparent proxy.
    const client = http2.connect(`http://${upstream}`);
    client.on('error', () => {});
    upstreams.set(session, client);
    session.on('close', () => client.close());
  });
  server.on('stream', (down, headers) => {
    const client = upstreams.get(down.session as http2.ServerHttp2Session);
    if (client === undefined) {
      down.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    const requests: Uint8Array[] = [];
    const responses: Uint8Array[] = [];
    let responseEncoding: string | undefined;
    let trailers: http2.IncomingHttpHeaders | undefined;
    let resolveEnded = () => {};
    const call: ProxiedCall = {
      path: String(headers[':path']),
      requestHeaders: headers,
      requests,
      responses,
      ended: new Promise<void>((resolve) => {
        resolveEnded = resolve;
      }),
    };
    calls.push(call);
    const finish = (final: http2.IncomingHttpHeaders) => {
      call.grpcStatus = Number(final['grpc-status']);
      const message = final['grpc-message'];
      if (message !== undefined) call.grpcMessage = decodeURIComponent(String(message));
      const details = final['grpc-status-details-bin'];
      if (details !== undefined) {
        call.grpcStatusDetails = new Uint8Array(Buffer.from(String(details), 'base64'));
      }
    };

    const up = client.request(forwardable(headers, [':method', ':path']), { endStream: false });
    up.on('error', () => {});
    down.on('error', () => {});
    const readRequest = messageReader(
      () => headers['grpc-encoding'] as string | undefined,
      requests,
    );
    const readResponse = messageReader(() => responseEncoding, responses);
    down.on('data', (chunk: Buffer) => {
      readRequest(chunk);
      up.write(chunk);
    });
    down.on('end', () => up.end());
    up.on('response', (responseHeaders, flags) => {
      responseEncoding = responseHeaders['grpc-encoding'] as string | undefined;
      const forwarded = forwardable(responseHeaders, [':status']);
      if ((flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0) {
        // Trailers-only: the status is in these headers (an error, typically).
        finish(responseHeaders);
        down.respond(forwarded, { endStream: true });
      } else {
        down.respond(forwarded, { waitForTrailers: true });
      }
    });
    down.on('wantTrailers', () => {
      down.sendTrailers(forwardable(trailers ?? {}));
    });
    up.on('trailers', (t) => {
      trailers = t;
      finish(t);
    });
    up.on('data', (chunk: Buffer) => {
      readResponse(chunk);
      down.write(chunk);
    });
    up.on('end', () => {
      if (!down.headersSent) return;
      if (!down.writableEnded) down.end();
    });
    // A reset on either side resets the other.
    up.on('close', () => {
      if (!down.closed && up.rstCode !== undefined && up.rstCode !== 0) down.close(up.rstCode);
      resolveEnded();
    });
    down.on('close', () => {
      if (!up.closed) up.close(down.rstCode ?? http2.constants.NGHTTP2_CANCEL);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    calls,
    async close() {
      for (const session of sessions) session.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
