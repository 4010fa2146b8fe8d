/**
 * @module A throwaway PKI for TLS tests, made at test time with the
 * `openssl` command in a temp folder: a CA, a server certificate for
 * `localhost` and `127.0.0.1`, and a client certificate, all signed by the
 * CA and valid for one day. Nothing is committed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Key type of every certificate: P-256 keys are fast to make. */
const KEY_ARGS = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** Validity in days. */
const DAYS = '1';

/** Paths of the PEM files, and a reader of their bytes. */
export interface TestPki {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  /** Reads one of the files above. */
  read(path: string): Buffer;
}

/** Makes a CA, a server certificate (`localhost`, `127.0.0.1`) and a client certificate. */
export function createTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-pki-'));
  const path = (name: string) => join(dir, name);
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl([
    'req',
    '-x509',
    ...KEY_ARGS,
    '-keyout',
    path('ca.key'),
    '-out',
    path('ca.crt'),
    '-days',
    DAYS,
    '-subj',
    '/CN=agenthooks test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const issue = (name: string, subject: string, extensions: string[]) => {
    openssl([
      'req',
      ...KEY_ARGS,
      '-keyout',
      path(`${name}.key`),
      '-out',
      path(`${name}.csr`),
      '-subj',
      subject,
    ]);
    writeFileSync(path(`${name}.ext`), `${extensions.join('\n')}\n`);
    openssl([
      'x509',
      '-req',
      '-in',
      path(`${name}.csr`),
      '-CA',
      path('ca.crt'),
      '-CAkey',
      path('ca.key'),
      '-CAcreateserial',
      '-out',
      path(`${name}.crt`),
      '-days',
      DAYS,
      '-extfile',
      path(`${name}.ext`),
    ]);
  };
  issue('server', '/CN=localhost', [
    'basicConstraints=CA:FALSE',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
    'extendedKeyUsage=serverAuth',
  ]);
  issue('client', '/CN=agenthooks test runtime', [
    'basicConstraints=CA:FALSE',
    'extendedKeyUsage=clientAuth',
  ]);
  return {
    dir,
    caCert: path('ca.crt'),
    serverCert: path('server.crt'),
    serverKey: path('server.key'),
    clientCert: path('client.crt'),
    clientKey: path('client.key'),
    read: (file) => readFileSync(file),
  };
}
