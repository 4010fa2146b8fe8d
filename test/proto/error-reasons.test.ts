/**
 * The `google.rpc.ErrorInfo` reasons agenthooks sends are the value names of
 * the proto enum `agenthooks.v1.ErrorReason`. `tsc` refuses an unknown reason
 * where the code is typed (`ErrorReasonName`); these tests check the run-time
 * side: the enum's names are valid reasons, every exported reason constant is
 * one, every reason written in src/ where an error or an ErrorInfo is built is
 * one (found by reading the source, so a cast cannot slip past), and every
 * enum value is sent somewhere.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ErrorReason, ErrorReasonSchema } from '../../gen/agenthooks/v1/errors_pb.js';
import { DeliveryError, type DeliveryErrorCode } from '../../src/delivery/webhook.js';
import { isErrorReasonName } from '../../src/errors.js';

const SRC = join(import.meta.dirname, '..', '..', 'src');

/** Modules that run on import (the process entry point), so they are read but not imported. */
const ENTRY_POINTS = new Set(['main.ts']);

/**
 * Declared for the transport edge (`src/server`), which does not send them yet.
 * Remove a name from here in the change that starts sending it.
 */
const NOT_YET_SENT = new Set<string>([]);

/** Constructors and helpers that take a reason, and the index of that argument. */
const REASON_ARGUMENT: Readonly<Record<string, number>> = {
  AgentHooksError: 1,
  InvalidArgumentError: 1,
  StoreUnavailableError: 0,
  errorInfo: 0,
  // src/store/store.ts: the stores' shared builder of a StoreUnavailableError.
  storeUnavailableError: 0,
};

/** One place in src/ where a reason is given. */
interface ReasonSite {
  readonly where: string;
  readonly source: string;
  /** The reason's value, when the expression is a literal or a constant of src/. */
  readonly value: string | undefined;
}

const sourceFiles: string[] = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(SRC, f))
  .sort();

const parsed = new Map(
  sourceFiles.map((file) => [
    file,
    ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true),
  ]),
);

/** Top-level string constants of a file, and `as const` objects of strings as `NAME.KEY`. */
function stringConstants(sf: ts.SourceFile): Map<string, string> {
  const out = new Map<string, string>();
  for (const statement of sf.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const d of statement.declarationList.declarations) {
      if (!ts.isIdentifier(d.name) || d.initializer === undefined) continue;
      let init = d.initializer;
      while (ts.isAsExpression(init) || ts.isParenthesizedExpression(init)) init = init.expression;
      if (ts.isStringLiteralLike(init)) out.set(d.name.text, init.text);
      if (ts.isObjectLiteralExpression(init)) {
        for (const p of init.properties) {
          if (ts.isPropertyAssignment(p) && ts.isIdentifier(p.name)) {
            if (ts.isStringLiteralLike(p.initializer)) {
              out.set(`${d.name.text}.${p.name.text}`, p.initializer.text);
            }
          }
        }
      }
    }
  }
  return out;
}

/** Local names imported from other src/ files: local name -> [file, exported name]. */
function importsOf(sf: ts.SourceFile): Map<string, [string, string]> {
  const out = new Map<string, [string, string]>();
  for (const statement of sf.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) {
      continue;
    }
    const spec = statement.moduleSpecifier.text;
    if (!spec.startsWith('.')) continue;
    const file = resolve(dirname(sf.fileName), spec.replace(/\.js$/, '.ts'));
    const named = statement.importClause?.namedBindings;
    if (named === undefined || !ts.isNamedImports(named)) continue;
    for (const el of named.elements) {
      out.set(el.name.text, [file, (el.propertyName ?? el.name).text]);
    }
  }
  return out;
}

const constants = new Map([...parsed].map(([file, sf]) => [file, stringConstants(sf)]));

/** The string values an expression can have, or undefined where one is not known statically. */
function valuesOf(expr: ts.Expression, sf: ts.SourceFile): (string | undefined)[] {
  if (ts.isAsExpression(expr) || ts.isParenthesizedExpression(expr)) {
    return valuesOf(expr.expression, sf);
  }
  if (ts.isConditionalExpression(expr)) {
    return [...valuesOf(expr.whenTrue, sf), ...valuesOf(expr.whenFalse, sf)];
  }
  if (ts.isStringLiteralLike(expr)) return [expr.text];
  const name = ts.isIdentifier(expr)
    ? expr.text
    : ts.isPropertyAccessExpression(expr) && ts.isIdentifier(expr.expression)
      ? `${expr.expression.text}.${expr.name.text}`
      : undefined;
  if (name === undefined) return [undefined];
  const local = constants.get(sf.fileName)?.get(name);
  if (local !== undefined) return [local];
  const [head, ...rest] = name.split('.');
  const imported = importsOf(sf).get(head ?? '');
  if (imported === undefined) return [undefined];
  const [file, exported] = imported;
  return [constants.get(file)?.get([exported, ...rest].join('.'))];
}

/** Index of the reason argument of a same-file function with a parameter `reason` typed as a reason. */
function reasonParameters(sf: ts.SourceFile): Map<string, number> {
  const out = new Map<string, number>();
  for (const statement of sf.statements) {
    if (!ts.isFunctionDeclaration(statement) || statement.name === undefined) continue;
    statement.parameters.forEach((p, i) => {
      const type = p.type !== undefined && ts.isTypeReferenceNode(p.type) ? p.type : undefined;
      if (
        ts.isIdentifier(p.name) &&
        p.name.text === 'reason' &&
        type !== undefined &&
        /Reason(Name)?$/.test(type.typeName.getText(sf))
      ) {
        out.set((statement.name as ts.Identifier).text, i);
      }
    });
  }
  return out;
}

/** Every place in src/ where a reason is given to an error or an ErrorInfo (or StreamError). */
function reasonSites(): ReasonSite[] {
  const sites: ReasonSite[] = [];
  for (const [file, sf] of parsed) {
    const helpers = reasonParameters(sf);
    const record = (node: ts.Expression) => {
      const { line } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
      for (const value of valuesOf(node, sf)) {
        sites.push({
          where: `${relative(SRC, file)}:${line + 1}`,
          source: node.getText(sf),
          value,
        });
      }
    };
    const visit = (node: ts.Node, superIndex: number | undefined) => {
      let inClass = superIndex;
      if (ts.isClassDeclaration(node)) {
        const base = node.heritageClauses
          ?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)
          ?.types[0]?.expression.getText(sf);
        inClass = base === undefined ? undefined : REASON_ARGUMENT[base];
      }
      if (ts.isNewExpression(node) || ts.isCallExpression(node)) {
        const callee = node.expression;
        const index =
          callee.kind === ts.SyntaxKind.SuperKeyword
            ? inClass
            : ts.isIdentifier(callee)
              ? (REASON_ARGUMENT[callee.text] ?? helpers.get(callee.text))
              : undefined;
        const arg = index === undefined ? undefined : node.arguments?.[index];
        if (arg !== undefined) record(arg);
      }
      if (ts.isObjectLiteralExpression(node)) {
        const props = new Map<string, ts.PropertyAssignment>();
        for (const p of node.properties) {
          if (ts.isPropertyAssignment(p) && ts.isIdentifier(p.name)) props.set(p.name.text, p);
        }
        // An ErrorInfo has a domain; a StreamError has a code.
        const reason = props.get('reason');
        if (reason !== undefined && (props.has('domain') || props.has('code'))) {
          record(reason.initializer);
        }
      }
      ts.forEachChild(node, (child) => visit(child, inClass));
    };
    visit(sf, undefined);
  }
  return sites;
}

/** The members of a string-literal union type alias of a src/ file. */
function unionMembers(file: string, alias: string): string[] {
  const sf = parsed.get(join(SRC, file));
  const decl = sf?.statements.find(
    (s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === alias,
  );
  if (decl === undefined || !ts.isUnionTypeNode(decl.type)) return [];
  return decl.type.types.flatMap((t) =>
    ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal) ? [t.literal.text] : [],
  );
}

/** Exported `REASON` objects and `*_REASON` constants of every src/ module, at run time. */
async function exportedReasonConstants(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const file of sourceFiles) {
    if (ENTRY_POINTS.has(relative(SRC, file))) continue;
    const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod)) {
      // `*_REASON` tables and constants, and constants named after their value
      // (`export const STORE_FILE_REPLACED = 'STORE_FILE_REPLACED'`).
      const namedAfterValue = typeof value === 'string' && value === name;
      if (!(name === 'REASON' || name.endsWith('_REASON') || namedAfterValue)) continue;
      const where = `${relative(SRC, file)} ${name}`;
      if (typeof value === 'string') out.set(where, value);
      else if (typeof value === 'object' && value !== null) {
        for (const [key, v] of Object.entries(value)) out.set(`${where}.${key}`, String(v));
      } else out.set(where, String(value));
    }
  }
  return out;
}

const enumNames = ErrorReasonSchema.values
  .filter((v) => v.number !== ErrorReason.ERROR_REASON_UNSPECIFIED)
  .map((v) => v.name);

const sites = reasonSites();

const deliveryCodes = unionMembers(
  'delivery/webhook.ts',
  'DeliveryErrorCode',
) as DeliveryErrorCode[];

describe('ErrorReason', () => {
  it('opens with ERROR_REASON_UNSPECIFIED = 0, which is not a reason', () => {
    expect(ErrorReasonSchema.values[0]).toMatchObject({
      name: 'ERROR_REASON_UNSPECIFIED',
      number: 0,
    });
    expect(isErrorReasonName('ERROR_REASON_UNSPECIFIED')).toBe(false);
    expect(isErrorReasonName('0')).toBe(false);
    expect(isErrorReasonName('NOT_A_REASON')).toBe(false);
  });

  it("names a BadRequest's field as the server sends it: the request's JSON name", () => {
    const proto = readFileSync(
      join(import.meta.dirname, '..', '..', 'proto', 'agenthooks', 'v1', 'errors.proto'),
      'utf8',
    );
    // Comments wrap: `BadRequest` and the field may sit on two lines.
    const text = proto.replace(/\n\s*\/\/\s*/g, ' ');
    const named = [...text.matchAll(/`BadRequest` names `([^`]+)`/g)].map((m) => m[1]);
    expect(named.length).toBeGreaterThan(0);
    // InvalidArgumentError fields are JSON names (`contextJson`, `event.context.identifier`).
    for (const field of named) expect(field).toMatch(/^[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9]*)*$/);
    const run = readFileSync(join(SRC, 'modify', 'run.ts'), 'utf8');
    const sent = /InvalidArgumentError\('(\w+)', MODIFY_CONTEXT_INVALID/.exec(run)?.[1];
    const comment = text.slice(0, text.indexOf('MODIFY_CONTEXT_INVALID =')).split(';').at(-1);
    expect(sent).toBe('contextJson');
    expect(comment).toContain(`\`BadRequest\` names \`${sent}\``);
  });

  it('names every reason as AIP-193 asks: UPPER_SNAKE, at most 63 characters', () => {
    expect(enumNames.length).toBeGreaterThan(60);
    for (const name of enumNames) {
      expect(name).toMatch(/^[A-Z0-9_]+$/);
      expect(name.length).toBeLessThanOrEqual(63);
      expect(isErrorReasonName(name)).toBe(true);
    }
  });

  it('has a name for every exported REASON and *_REASON constant of src/', async () => {
    const exported = await exportedReasonConstants();
    // The constants of the server edge, the hooks and validation are among them.
    expect([...exported.values()]).toEqual(
      expect.arrayContaining(['INTERNAL', 'UNAUTHENTICATED', 'CANCELLED', 'TOO_MANY_HOOKS']),
    );
    const unknown = [...exported].filter(([, value]) => !isErrorReasonName(value));
    expect(unknown).toEqual([]);
  });

  it('has a name for every reason written in src/ where an error or ErrorInfo is built', () => {
    const known = sites.filter((s) => s.value !== undefined);
    // Literals and constants from every layer: config, store, hooks, server.
    expect(known.length).toBeGreaterThan(80);
    expect(known.map((s) => s.value)).toEqual(
      expect.arrayContaining([
        'INVALID_FLAG',
        'STORE_CLOSED',
        'STORE_NEWER_THAN_CODE',
        'TOOL_RESULT_REQUIRED',
        'USERS_FILE_UNREADABLE',
        'UNAUTHENTICATED',
        'INTERNAL',
        'CRITICAL_HOOK_DELIVERY_FAILED',
      ]),
    );
    const unknown = known.filter((s) => !isErrorReasonName(s.value as string));
    expect(unknown).toEqual([]);
  });

  it('has a name for the reason of every DeliveryError code (WEBHOOK_<code>)', () => {
    expect(deliveryCodes).toContain('configuration');
    for (const code of deliveryCodes) {
      const { reason } = new DeliveryError(code);
      expect(isErrorReasonName(reason), `${code} -> ${reason}`).toBe(true);
    }
  });

  it('sends every reason it declares, except those listed as not yet sent', async () => {
    const sent = new Set<string>([
      ...sites.flatMap((s) => (s.value === undefined ? [] : [s.value])),
      ...(await exportedReasonConstants()).values(),
      ...deliveryCodes.map((code) => new DeliveryError(code).reason),
    ]);
    const unsent = enumNames.filter((name) => !sent.has(name) && !NOT_YET_SENT.has(name));
    expect(unsent).toEqual([]);
    // A name that is sent now comes off the list.
    expect([...NOT_YET_SENT].filter((name) => sent.has(name))).toEqual([]);
    expect([...NOT_YET_SENT].filter((name) => !isErrorReasonName(name))).toEqual([]);
  });
});
