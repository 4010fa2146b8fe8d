/**
 * @module The generated Python client as pip installs it: the wheel built
 * from a copy of `clients/python` (setuptools, offline, no build isolation,
 * so no build folder is left in the checkout, nor read from it) carries what
 * a runtime's type checker needs.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/sidecar.js';

const execFileAsync = promisify(execFile);
const PYTHON = join(REPO_ROOT, '.venv', 'bin', 'python');

describe('the Python client package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agenthooks-wheel-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ships py.typed beside the .pyi stubs, so mypy reads them once pip-installed (PEP 561)', async () => {
    const source = join(dir, 'source');
    cpSync(join(REPO_ROOT, 'clients', 'python'), source, {
      recursive: true,
      filter: (path) => !/(^|\/)(build|[^/]*\.egg-info|__pycache__)$/.test(path),
    });
    const wheels = join(dir, 'wheels');
    await execFileAsync(
      PYTHON,
      [
        '-m',
        'pip',
        'wheel',
        '--quiet',
        '--no-deps',
        '--no-index',
        '--no-build-isolation',
        '--disable-pip-version-check',
        '--wheel-dir',
        wheels,
        source,
      ],
      { cwd: source, timeout: 120_000 },
    );
    const wheel = readdirSync(wheels).find((f) => f.endsWith('.whl'));
    expect(wheel).toBeDefined();
    const { stdout } = await execFileAsync(PYTHON, [
      '-c',
      'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))',
      join(wheels, wheel ?? ''),
    ]);
    const files = stdout.trim().split('\n');
    expect(files).toContain('agenthooks_client/py.typed');
    expect(files).toContain('agenthooks_client/v1/service_pb2.pyi');
  }, 150_000);
});
