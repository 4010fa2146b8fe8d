/** @module Tests of the effective environment: env file parsing, overlay, reloads and watching. */
import {
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HookType } from '../../gen/agenthooks/v1/events_pb.js';
import { ResponseHandling } from '../../gen/agenthooks/v1/hooks_pb.js';
import {
  EffectiveEnvironment,
  type EffectiveEnvironmentOptions,
  INVALID_ENV_FILE,
  parseEnvFile,
} from '../../src/config/environment.js';
import { AgentHooksError } from '../../src/errors.js';
import { INVALID_ENVIRONMENT } from '../../src/hooks/environment-hooks.js';
import { errorOf, recordingLogger, writeAtomically } from '../support/recording-logger.js';

const TOKEN = 'synthetic-secret-7c13';
const URL = 'https://hooks.example/ingress';

/** A valid env file with one `beforeToolCall` control. */
const CONTROL_FILE = [
  `AGENT_HOOK_WEBHOOK_URL=${URL}`,
  `AGENT_HOOK_WEBHOOK_TOKEN=${TOKEN}`,
  'AGENT_HOOK_WEBHOOK_EVENTS=beforeToolCall',
  'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall',
  '',
].join('\n');

describe('parseEnvFile', () => {
  it.each([
    ['an empty file', '', {}],
    ['blank lines and comments', '\n  \n# A=1\n   # B=2\n\r\n', {}],
    ['a plain assignment', 'A=1', { A: '1' }],
    ['CRLF line ends and a byte order mark', '\uFEFFA=1\r\nB=2\r\n', { A: '1', B: '2' }],
    ['export and spaces around =', 'export A = x y \n  export\tB=2', { A: 'x y', B: '2' }],
    ['an empty value', 'A=\nB=  ', { A: '', B: '' }],
    ['a # inside an unquoted value, kept', 'A=abc #def', { A: 'abc #def' }],
    ['= inside a value', 'A=b=c==', { A: 'b=c==' }],
    ['a literal single-quoted value', `A=' a\\n"b" ' # note`, { A: ' a\\n"b" ' }],
    [
      'double-quoted escapes',
      'A="x\\ny \\"q\\" \\\\ \\t" # note\nB=""',
      { A: 'x\ny "q" \\ \\t', B: '' },
    ],
    ['a later line winning', 'A=1\nA=2', { A: '2' }],
    ['names with digits and underscores', '_A1=x\nb_2=y', { _A1: 'x', b_2: 'y' }],
    ['a __proto__ key, kept as data', '__proto__=x', { ['__proto__']: 'x' }],
  ] satisfies [string, string, Record<string, string>][])('parses %s', (_, text, expected) => {
    const parsed = parseEnvFile(text);
    expect(parsed).toEqual(expected);
    expect(Object.keys(parsed)).toEqual(Object.keys(expected));
  });

  it.each([
    ['a line without =', `A=1\n${TOKEN}\n`, 2, 'expected KEY=VALUE'],
    ['export without =', `export ${TOKEN}`, 1, 'expected KEY=VALUE'],
    ['a name starting with a digit', '\n\n1A=x', 3, 'invalid variable name'],
    ['a name with a dash', `MY-${TOKEN}=x`, 1, 'invalid variable name'],
    ['an empty name', `=${TOKEN}`, 1, 'invalid variable name'],
    ['an unterminated single quote', `A='${TOKEN}`, 1, 'unterminated single-quoted value'],
    ['an unterminated double quote', `A="${TOKEN}\\"`, 1, 'unterminated double-quoted value'],
    ['text after a closing quote', `A="x"${TOKEN}`, 1, 'unexpected text after the closing quote'],
  ])('refuses %s, naming the line and never its content', (_, text, line, what) => {
    const error = errorOf(() => parseEnvFile(text));
    expect(error.reason).toBe(INVALID_ENV_FILE);
    expect(error.message).toBe(`line ${line}: ${what}`);
    expect(error.metadata).toEqual({ line: String(line) });
    expect(error.message).not.toContain(TOKEN);
  });
});

describe('EffectiveEnvironment', () => {
  let dir: string;
  let envFile: string;
  const opened: EffectiveEnvironment[] = [];

  /** Opens an environment closed after the test; `watch` defaults to false here. */
  function open(
    options: Partial<EffectiveEnvironmentOptions> & Pick<EffectiveEnvironmentOptions, 'logger'>,
  ): EffectiveEnvironment {
    const environment = new EffectiveEnvironment({ processEnv: {}, watch: false, ...options });
    opened.push(environment);
    return environment;
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agenthooks-env-'));
    envFile = join(dir, 'agent.env');
  });

  afterEach(() => {
    for (const environment of opened.splice(0)) environment.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('without an env file', () => {
    it('uses the process environment, generation 1, and logs the load without values', () => {
      const { logger, lines } = recordingLogger();
      const processEnv = {
        AGENT_HOOK_WEBHOOK_URL: URL,
        AGENT_HOOK_WEBHOOK_TOKEN: TOKEN,
        AGENT_HOOK_WEBHOOK_EVENTS: 'onComplete',
        PATH: '/usr/bin',
      };
      const environment = open({ processEnv, logger });
      const snapshot = environment.current();
      expect(snapshot.generation).toBe(1);
      expect(snapshot.env).toEqual(processEnv);
      expect(snapshot.fileError).toBeUndefined();
      expect(environment.hooksOrThrow().map((h) => h.id)).toEqual([
        'server-env-webhook:onComplete',
      ]);
      expect(lines).toEqual([
        {
          level: 'info',
          msg: 'environment reloaded',
          fields: { generation: 1, cause: 'start', valid: true, hooks: 1 },
        },
      ]);
    });

    it('throws INVALID_ENVIRONMENT from hooksOrThrow while the environment is invalid', () => {
      const { logger, lines } = recordingLogger();
      const environment = open({
        processEnv: { AGENT_HOOK_WEBHOOK_URL: URL, AGENT_HOOK_WEBHOOK_TOKEN: TOKEN },
        logger,
      });
      const error = errorOf(() => environment.hooksOrThrow());
      expect(error.reason).toBe(INVALID_ENVIRONMENT);
      expect(error.message).toBe(
        'AGENT_HOOK_WEBHOOK_URL requires non-empty AGENT_HOOK_WEBHOOK_EVENTS',
      );
      expect(lines.at(-1)?.fields).toEqual({
        generation: 1,
        cause: 'start',
        valid: false,
        hooks: 0,
        reason: INVALID_ENVIRONMENT,
        error: 'AGENT_HOOK_WEBHOOK_URL requires non-empty AGENT_HOOK_WEBHOOK_EVENTS',
      });
    });

    it('reads the process environment again at each reload', () => {
      const processEnv: Record<string, string | undefined> = {};
      const environment = open({ processEnv, logger: recordingLogger().logger });
      expect(environment.hooksOrThrow()).toEqual([]);
      Object.assign(processEnv, {
        AGENT_HOOK_WEBHOOK_URL: URL,
        AGENT_HOOK_WEBHOOK_TOKEN: TOKEN,
        AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
      });
      expect(environment.hooksOrThrow()).toEqual([]);
      expect(environment.reload('signal').generation).toBe(2);
      expect(environment.hooksOrThrow()).toHaveLength(1);
    });
  });

  describe('with an env file', () => {
    it('overlays the process environment, the file winning', () => {
      writeFileSync(envFile, `${CONTROL_FILE}SHARED=from-file\nEMPTIED=\n`);
      const environment = open({
        processEnv: {
          AGENT_HOOK_WEBHOOK_URL: 'https://process.example/x',
          SHARED: 'from-process',
          EMPTIED: 'from-process',
          ONLY_PROCESS: 'kept',
        },
        envFile,
        logger: recordingLogger().logger,
      });
      const { env } = environment.current();
      expect(env).toMatchObject({
        AGENT_HOOK_WEBHOOK_URL: URL,
        SHARED: 'from-file',
        EMPTIED: '',
        ONLY_PROCESS: 'kept',
      });
      expect(Object.isFrozen(env)).toBe(true);
      const [hook] = environment.hooksOrThrow();
      expect(hook?.webhook?.url).toBe(URL);
    });

    it('reads an empty URL in the file over the process environment as set, and invalid (as the reference reads one)', () => {
      writeFileSync(envFile, 'AGENT_HOOK_WEBHOOK_URL=\n');
      const environment = open({
        processEnv: {
          AGENT_HOOK_WEBHOOK_URL: URL,
          AGENT_HOOK_WEBHOOK_TOKEN: TOKEN,
          AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
        },
        envFile,
        logger: recordingLogger().logger,
      });
      // Never "no hooks": a URL templated to nothing would otherwise drop the policy.
      expect(() => environment.hooksOrThrow()).toThrow(
        'Invalid Agent Hook environment: AGENT_HOOK_WEBHOOK_URL',
      );
    });

    it('keeps the snapshot until a reload, then counts generations one by one', () => {
      writeFileSync(envFile, '');
      const { logger, lines } = recordingLogger();
      const environment = open({ envFile, logger });
      const first = environment.current();
      writeFileSync(envFile, CONTROL_FILE);
      expect(environment.current()).toBe(first);
      expect(environment.hooksOrThrow()).toEqual([]);

      const second = environment.reload('manual');
      expect(second.generation).toBe(2);
      expect(environment.current()).toBe(second);
      const [control] = environment.hooksOrThrow();
      expect(control?.id).toBe('server-env-webhook:beforeToolCall');
      expect(control?.type).toBe(HookType.BEFORE_TOOL_CALL);
      expect(control?.webhook?.responseHandling).toBe(ResponseHandling.TOOL_CALL);

      // The variables go away: the control goes with them.
      writeFileSync(envFile, 'UNRELATED=1\n');
      expect(environment.reload('signal').generation).toBe(3);
      expect(environment.hooksOrThrow()).toEqual([]);
      expect(environment.reload('manual').generation).toBe(4);

      expect(lines.map((l) => [l.fields.generation, l.fields.cause, l.fields.hooks])).toEqual([
        [1, 'start', 0],
        [2, 'manual', 1],
        [3, 'signal', 0],
        [4, 'manual', 0],
      ]);
      expect(JSON.stringify(lines)).not.toContain(TOKEN);
    });

    it('fails closed when the configured file is missing', () => {
      const { logger, lines } = recordingLogger();
      const environment = open({
        processEnv: {
          AGENT_HOOK_WEBHOOK_URL: URL,
          AGENT_HOOK_WEBHOOK_TOKEN: TOKEN,
          AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep',
        },
        envFile,
        logger,
      });
      const snapshot = environment.current();
      expect(snapshot.hooks.ok).toBe(false);
      expect(snapshot.fileError?.reason).toBe(INVALID_ENVIRONMENT);
      expect(snapshot.fileError?.kind).toBe('failed_precondition');
      expect(snapshot.fileError?.message).toBe(
        `Invalid Agent Hook environment: env file ${envFile} does not exist`,
      );
      expect(snapshot.fileError?.metadata).toEqual({ envFile });
      expect(errorOf(() => environment.hooksOrThrow())).toBe(snapshot.fileError);
      // The process environment alone stays readable.
      expect(snapshot.env).toMatchObject({ AGENT_HOOK_WEBHOOK_URL: URL });
      expect(lines[0]?.fields).toMatchObject({ valid: false, hooks: 0 });
    });

    it('fails closed when the file is unreadable', () => {
      mkdirSync(envFile);
      const environment = open({ envFile, logger: recordingLogger().logger });
      expect(environment.current().fileError?.message).toBe(
        `Invalid Agent Hook environment: env file ${envFile} cannot be read (EISDIR)`,
      );
      expect(() => environment.hooksOrThrow()).toThrow(AgentHooksError);
    });

    it('fails closed, not with the last good policy, when the file becomes unparsable', () => {
      writeFileSync(envFile, CONTROL_FILE);
      const { logger, lines } = recordingLogger();
      const environment = open({ envFile, logger });
      expect(environment.hooksOrThrow()).toHaveLength(1);

      writeFileSync(envFile, `${CONTROL_FILE}not an assignment ${TOKEN}\n`);
      const snapshot = environment.reload('signal');
      expect(snapshot.hooks.ok).toBe(false);
      const error = errorOf(() => environment.hooksOrThrow());
      expect(error.reason).toBe(INVALID_ENVIRONMENT);
      expect(error.message).toBe(
        `Invalid Agent Hook environment: env file ${envFile} cannot be parsed: line 5: expected KEY=VALUE`,
      );
      expect(error.metadata).toEqual({ envFile, line: '5' });
      expect(snapshot.env.AGENT_HOOK_WEBHOOK_URL).toBeUndefined();
      expect(JSON.stringify(lines)).not.toContain(TOKEN);

      writeFileSync(envFile, Buffer.from([0x41, 0x3d, 0xff, 0x0a]));
      expect(environment.reload('manual').fileError?.message).toMatch(
        /cannot be parsed: not UTF-8$/,
      );
    });
  });

  describe('names it does not read', () => {
    it('refuses a misspelt AGENT_HOOK_WEBHOOK_* in the env file, naming the one it likely means', () => {
      writeFileSync(envFile, `${CONTROL_FILE}AGENT_HOOK_WEBHOOK_ONERROR=block\n`);
      const { logger, lines } = recordingLogger();
      const environment = open({ envFile, logger });
      const error = errorOf(() => environment.hooksOrThrow());
      expect(error.reason).toBe(INVALID_ENVIRONMENT);
      expect(error.kind).toBe('failed_precondition');
      expect(error.message).toBe(
        `Invalid Agent Hook environment: unknown variable AGENT_HOOK_WEBHOOK_ONERROR in env file ${envFile}; did you mean 'AGENT_HOOK_WEBHOOK_ON_ERROR'?`,
      );
      expect(error.metadata).toMatchObject({ variables: 'AGENT_HOOK_WEBHOOK_ONERROR' });
      expect(environment.current().fileError).toBeUndefined();
      expect(lines[0]?.fields).toMatchObject({ valid: false, reason: INVALID_ENVIRONMENT });
      expect(JSON.stringify(lines)).not.toContain(TOKEN);

      writeFileSync(envFile, `${CONTROL_FILE}AGENT_HOOK_WEBHOOK_ON_ERROR=block\n`);
      environment.reload('signal');
      expect(environment.hooksOrThrow()).toHaveLength(1);
    });

    it('refuses a misspelt AGENT_HOOK_WEBHOOK_* in the process environment', () => {
      const environment = open({
        processEnv: { AGENT_HOOK_WEBHOOK_EVENT: 'beforeToolCall' },
        logger: recordingLogger().logger,
      });
      expect(() => environment.hooksOrThrow()).toThrow(
        "Invalid Agent Hook environment: unknown variable AGENT_HOOK_WEBHOOK_EVENT in the process environment; did you mean 'AGENT_HOOK_WEBHOOK_EVENTS'?",
      );
    });

    it("refuses the sidecar's own settings in the env file, which only the process environment sets", () => {
      writeFileSync(envFile, `${CONTROL_FILE}AGENTHOOKS_AUTH_TOKN=${TOKEN}\n`);
      const environment = open({ envFile, logger: recordingLogger().logger });
      const error = errorOf(() => environment.hooksOrThrow());
      expect(error.reason).toBe(INVALID_ENVIRONMENT);
      expect(error.message).toContain(`env file ${envFile} sets AGENTHOOKS_AUTH_TOKN`);
      expect(error.message).toContain('read from its process environment or flags only');
      expect(error.message).not.toContain(TOKEN);
    });

    it('takes the AGENTHOOKS_* variables read from the effective environment in the env file', () => {
      const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
      writeFileSync(
        envFile,
        `${CONTROL_FILE}AGENTHOOKS_SIGNING_SECRET_R=${secret}\nAGENTHOOKS_SIGNING_ORIGINS_R=https://hooks.example\nAGENTHOOKS_AUDIT_HTTP_AUTHORIZATION=Bearer x\n`,
      );
      const environment = open({
        // Names of the process environment the sidecar does not read stay allowed.
        processEnv: { AGENTHOOKS_ADDRESS: '127.0.0.1:50051', AGENT_HOOK_OTHER: 'x' },
        envFile,
        logger: recordingLogger().logger,
      });
      expect(environment.hooksOrThrow()).toHaveLength(1);
    });
  });

  describe('watching', () => {
    it('reloads when the file is replaced atomically, and when it is deleted', async () => {
      writeFileSync(envFile, 'UNRELATED=1\n');
      const log = recordingLogger();
      const environment = open({ envFile, logger: log.logger, watch: true });
      expect(environment.hooksOrThrow()).toEqual([]);

      writeAtomically(envFile, CONTROL_FILE);
      expect((await log.reloaded(2)).fields).toEqual({
        generation: 2,
        cause: 'file',
        valid: true,
        hooks: 1,
      });
      expect(environment.hooksOrThrow().map((h) => h.id)).toEqual([
        'server-env-webhook:beforeToolCall',
      ]);

      unlinkSync(envFile);
      expect((await log.reloaded(3)).fields).toMatchObject({ cause: 'file', valid: false });
      expect(() => environment.hooksOrThrow()).toThrow(/does not exist$/);
    });

    it('follows a Kubernetes volume update (a swapped ..data symlink)', async () => {
      // The layout kubelet writes: agent.env -> ..data/agent.env, ..data -> ..<timestamp>.
      mkdirSync(join(dir, '..v1'));
      writeFileSync(join(dir, '..v1', 'agent.env'), CONTROL_FILE);
      symlinkSync('..v1', join(dir, '..data'));
      symlinkSync(join('..data', 'agent.env'), envFile);
      const log = recordingLogger();
      const environment = open({ envFile, logger: log.logger, watch: true });
      expect(environment.hooksOrThrow()).toHaveLength(1);

      mkdirSync(join(dir, '..v2'));
      writeFileSync(join(dir, '..v2', 'agent.env'), '# environment hooks off\n');
      symlinkSync('..v2', join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      rmSync(join(dir, '..v1'), { recursive: true });

      expect((await log.reloaded(2)).fields).toMatchObject({ cause: 'file', hooks: 0 });
      expect(environment.hooksOrThrow()).toEqual([]);
    });

    it('does not reload when the bytes did not change', async () => {
      writeFileSync(envFile, CONTROL_FILE);
      const log = recordingLogger();
      const environment = open({ envFile, logger: log.logger, watch: true });
      writeAtomically(envFile, CONTROL_FILE);
      await log.waitFor((l) => l.msg === 'env file unchanged');
      expect(environment.current().generation).toBe(1);
    });

    it('stops watching on close', async () => {
      writeFileSync(envFile, '');
      const closed = open({ envFile, logger: recordingLogger().logger, watch: true });
      const witness = recordingLogger();
      open({ envFile, logger: witness.logger, watch: true });
      closed.close();
      writeAtomically(envFile, CONTROL_FILE);
      await witness.reloaded(2);
      expect(closed.current().generation).toBe(1);
      // A closed environment still reloads on demand.
      expect(closed.reload('manual').hooks).toMatchObject({ ok: true });
      expect(closed.hooksOrThrow()).toHaveLength(1);
    });

    it('tolerates a missing directory and notices the file once it appears', async () => {
      const later = join(dir, 'not-mounted-yet');
      const file = join(later, 'agent.env');
      const log = recordingLogger();
      const environment = open({ envFile: file, logger: log.logger, watch: true });
      expect(environment.current().hooks.ok).toBe(false);
      expect(log.lines.some((l) => l.level === 'warn')).toBe(true);

      mkdirSync(later);
      writeAtomically(file, CONTROL_FILE);
      expect((await log.reloaded(2)).fields).toMatchObject({ cause: 'file', valid: true });
      expect(environment.hooksOrThrow()).toHaveLength(1);
    });
  });
});
