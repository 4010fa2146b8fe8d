/**
 * @module Transport security of the listeners: TLS and mutual TLS for TCP
 * listeners (`--tls-cert`, `--tls-key`, `--tls-client-ca`), and the mode
 * and group of unix sockets (`--socket-mode`, `--socket-group`), so that a
 * runtime running as another user reaches the socket through its group and
 * nobody else does.
 */
import { chmodSync, chownSync, readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { TlsFiles } from '../config/config.js';
import { AgentHooksError } from '../errors.js';

/** Reason of a TLS file or socket group that cannot be used at start-up. */
export const INVALID_TRANSPORT_SECURITY_REASON = 'INVALID_TRANSPORT_SECURITY';

/** Where group names are looked up. */
const GROUP_FILE = '/etc/group';

/** A numeric group id. */
const GID = /^\d+$/;

/** The umask in force while a unix socket is bound: owner read and write only. */
const BIND_UMASK = 0o177;

/** The PEM contents of the TLS files. */
export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** CA of client certificates; set means mutual TLS. */
  readonly clientCa?: Buffer;
}

/**
 * Reads the PEM files of `--tls-cert`, `--tls-key` and `--tls-client-ca`.
 *
 * @throws AgentHooksError `INVALID_TRANSPORT_SECURITY` naming the file that cannot be read.
 */
export function readTlsMaterial(files: TlsFiles): TlsMaterial {
  const read = (path: string, flag: string) => {
    try {
      return readFileSync(path);
    } catch (e: unknown) {
      throw new AgentHooksError(
        'failed_precondition',
        INVALID_TRANSPORT_SECURITY_REASON,
        `cannot read --${flag} ${path}`,
        { cause: e },
      );
    }
  };
  return {
    cert: read(files.certFile, 'tls-cert'),
    key: read(files.keyFile, 'tls-key'),
    clientCa:
      files.clientCaFile === undefined ? undefined : read(files.clientCaFile, 'tls-client-ca'),
  };
}

/**
 * The grpc-js credentials of a TCP listener: TLS with `material`, requiring
 * and checking a client certificate when it has a client CA; plaintext
 * without it.
 */
export function grpcServerCredentials(material: TlsMaterial | undefined): grpc.ServerCredentials {
  if (material === undefined) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    material.clientCa ?? null,
    [{ private_key: material.key, cert_chain: material.cert }],
    material.clientCa !== undefined,
  );
}

/**
 * Resolves `--socket-group`: a numeric GID as is, a name from `/etc/group`.
 *
 * @throws AgentHooksError `INVALID_TRANSPORT_SECURITY` for an unknown name.
 * @example resolveGroup('4242') // 4242
 */
export function resolveGroup(group: string, groupFile = GROUP_FILE): number {
  if (GID.test(group)) return Number(group);
  let text = '';
  try {
    text = readFileSync(groupFile, 'utf8');
  } catch (e: unknown) {
    throw new AgentHooksError(
      'failed_precondition',
      INVALID_TRANSPORT_SECURITY_REASON,
      `cannot read ${groupFile} to look up --socket-group ${group}; give a GID`,
      { cause: e },
    );
  }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined && GID.test(gid)) return Number(gid);
  }
  throw new AgentHooksError(
    'failed_precondition',
    INVALID_TRANSPORT_SECURITY_REASON,
    `--socket-group ${group} is not in ${groupFile}`,
  );
}

/**
 * Runs `bind` (which creates a unix socket) with a umask that leaves the
 * new socket to its owner alone, then sets its mode and group: there is no
 * moment when the socket is more open than configured.
 */
export async function bindUnixSocket<T>(
  path: string,
  mode: number,
  gid: number | undefined,
  bind: () => Promise<T>,
): Promise<T> {
  const previous = process.umask(BIND_UMASK);
  let bound: T;
  try {
    bound = await bind();
  } finally {
    process.umask(previous);
  }
  // The group first, so the group bits never apply to the wrong group.
  if (gid !== undefined) chownSync(path, -1, gid);
  chmodSync(path, mode);
  return bound;
}
