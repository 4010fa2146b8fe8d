/**
 * @module A tiny authoritative DNS responder over UDP on 127.0.0.1 (RFC 1035
 * §4), for tests that must control what a host name resolves to and change
 * it between two lookups (DNS rebinding). It answers A queries of the names
 * it was given, each query with the next address of the name's list (the
 * last one repeats), with a TTL of 0; AAAA and other queries of a known
 * name get an empty answer, unknown names NXDOMAIN.
 */

import * as dgram from 'node:dgram';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

/** DNS record types used here (RFC 1035 §3.2.2, RFC 3596). */
const TYPE_A = 1;
const CLASS_IN = 1;

/** Header flags of an answer: QR (response) and AA (authoritative); RD is copied from the query. */
const FLAG_QR = 0x8000;
const FLAG_AA = 0x0400;
const FLAG_RD = 0x0100;
const FLAG_RA = 0x0080;

/** Response codes. */
const RCODE_NXDOMAIN = 3;
const RCODE_FORMERR = 1;

/** Size of the DNS header. */
const HEADER_BYTES = 12;

/** A compression pointer to the question's name, which starts right after the header. */
const NAME_POINTER = 0xc000 | HEADER_BYTES;

/** One query the responder received. */
export interface DnsQuery {
  /** The queried name, lower-cased, without the trailing dot. */
  readonly name: string;
  /** Record type: 1 for A, 28 for AAAA. */
  readonly type: number;
  /** The address answered, for an A query that got one. */
  readonly answered?: string;
}

/** A running responder. */
export interface DnsResponder {
  /** `127.0.0.1:port`, as `--dns-server` takes it. */
  readonly server: string;
  /** Every query received, in order. */
  readonly queries: DnsQuery[];
  /** Sets the A answers of `name`: the n-th query gets `addresses[n]`, the last one repeats. */
  answer(name: string, addresses: readonly string[]): void;
  close(): Promise<void>;
}

/** Starts a responder on 127.0.0.1, port 0. */
export async function startDnsResponder(): Promise<DnsResponder> {
  const answers = new Map<string, { addresses: readonly string[]; next: number }>();
  const queries: DnsQuery[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (message, peer) => {
    const reply = respond(message, answers, queries);
    if (reply !== undefined) socket.send(reply, peer.port, peer.address);
  });
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  const { port } = socket.address() as AddressInfo;
  return {
    server: `127.0.0.1:${port}`,
    queries,
    answer(name, addresses) {
      answers.set(name.toLowerCase(), { addresses, next: 0 });
    },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** Builds the answer to one query message; undefined for a message too short to answer. */
function respond(
  message: Buffer,
  answers: Map<string, { addresses: readonly string[]; next: number }>,
  queries: DnsQuery[],
): Buffer | undefined {
  if (message.length < HEADER_BYTES) return undefined;
  const id = message.readUInt16BE(0);
  const flags = message.readUInt16BE(2);
  const question = readQuestion(message);
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt16BE(id, 0);
  const baseFlags = FLAG_QR | FLAG_AA | FLAG_RA | (flags & FLAG_RD);
  if (question === undefined) {
    header.writeUInt16BE(baseFlags | RCODE_FORMERR, 2);
    return header;
  }
  header.writeUInt16BE(1, 4); // one question, echoed
  const entry = answers.get(question.name);
  if (entry === undefined) {
    queries.push({ name: question.name, type: question.type });
    header.writeUInt16BE(baseFlags | RCODE_NXDOMAIN, 2);
    return Buffer.concat([header, question.bytes]);
  }
  header.writeUInt16BE(baseFlags, 2);
  if (question.type !== TYPE_A || question.qclass !== CLASS_IN) {
    queries.push({ name: question.name, type: question.type });
    return Buffer.concat([header, question.bytes]);
  }
  const address = entry.addresses[Math.min(entry.next, entry.addresses.length - 1)] as string;
  entry.next += 1;
  queries.push({ name: question.name, type: question.type, answered: address });
  header.writeUInt16BE(1, 6); // one answer
  const record = Buffer.alloc(16);
  record.writeUInt16BE(NAME_POINTER, 0);
  record.writeUInt16BE(TYPE_A, 2);
  record.writeUInt16BE(CLASS_IN, 4);
  record.writeUInt32BE(0, 6); // TTL 0: nothing may cache it
  record.writeUInt16BE(4, 10);
  address.split('.').forEach((octet, i) => {
    record.writeUInt8(Number(octet), 12 + i);
  });
  return Buffer.concat([header, question.bytes, record]);
}

/** Reads the first question: its name, type, class and raw bytes (to echo). */
function readQuestion(
  message: Buffer,
): { name: string; type: number; qclass: number; bytes: Buffer } | undefined {
  if (message.readUInt16BE(4) < 1) return undefined;
  const labels: string[] = [];
  let at = HEADER_BYTES;
  while (at < message.length) {
    const length = message.readUInt8(at);
    at += 1;
    if (length === 0) break;
    // Queries carry no compression; a pointer here is malformed.
    if (length > 63 || at + length > message.length) return undefined;
    labels.push(message.toString('latin1', at, at + length));
    at += length;
  }
  if (at + 4 > message.length) return undefined;
  const type = message.readUInt16BE(at);
  const qclass = message.readUInt16BE(at + 2);
  return {
    name: labels.join('.').toLowerCase(),
    type,
    qclass,
    bytes: message.subarray(HEADER_BYTES, at + 4),
  };
}
