/**
 * @module Architecture tests: the import graph of `src/` between folders
 * (DESIGN.md "Layers"). A node is a folder directly under `src/` (`hooks`) or
 * a top-level file (`errors.ts`). Edges come from the static `import … from`
 * and `export … from` declarations of every `src/**\/*.ts` file, type-only
 * ones included: a type import still ties the two folders' designs together.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/** Root of the sources whose imports are checked. */
const SRC = resolve(import.meta.dirname, '..', 'src');

/** One import declaration between two nodes of `src/`. */
interface Import {
  /** Importing file, relative to the repository (`src/hooks/dispatch.ts`). */
  readonly file: string;
  /** The module specifier as written (`../delivery/webhook.js`). */
  readonly specifier: string;
  /** Node of the importing file. */
  readonly from: string;
  /** Node of the imported module. */
  readonly to: string;
}

/** Returns the module specifiers of a file's static import and export-from declarations. */
function moduleSpecifiers(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const specifiers: string[] = [];
  for (const statement of source.statements) {
    if (
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier !== undefined &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      specifiers.push(statement.moduleSpecifier.text);
    }
  }
  return specifiers;
}

/** Node of a path under `src/`: its first segment, a top-level file keeping its `.ts` name. */
function nodeOf(path: string): string | undefined {
  const rel = relative(SRC, path);
  if (rel.startsWith('..')) return undefined;
  const [first, ...rest] = rel.split(sep);
  if (first === undefined) return undefined;
  return rest.length === 0 ? first.replace(/\.js$/, '.ts') : first;
}

/** Every `.ts` file under `dir`. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/** Every import between two different nodes of `src/`; packages and `gen/` are not nodes. */
function srcImports(): Import[] {
  const imports: Import[] = [];
  for (const path of sourceFiles(SRC)) {
    const from = nodeOf(path) as string;
    for (const specifier of moduleSpecifiers(path, readFileSync(path, 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const to = nodeOf(resolve(dirname(path), specifier));
      if (to === undefined || to === from) continue;
      imports.push({ file: relative(resolve(SRC, '..'), path), specifier, from, to });
    }
  }
  return imports;
}

/** The imports from node `from` into any node of `to`, as `file -> specifier` lines. */
function importsBetween(imports: readonly Import[], from: string, to: readonly string[]): string[] {
  return imports
    .filter((i) => i.from === from && to.includes(i.to))
    .map((i) => `${i.file} -> ${i.specifier}`);
}

/** Returns the graph of `imports`: each node and the nodes it imports, both sorted. */
function graphOf(imports: readonly Import[]): Map<string, string[]> {
  const edges = new Map<string, Set<string>>();
  for (const { from, to } of imports) {
    edges.set(from, (edges.get(from) ?? new Set()).add(to));
    if (!edges.has(to)) edges.set(to, new Set());
  }
  return new Map(
    [...edges.keys()].sort().map((node) => [node, [...(edges.get(node) ?? [])].sort()]),
  );
}

/**
 * Returns one cycle of `graph` as its nodes, the first repeated last
 * (`['config', 'users', 'config']`), or `undefined` when there is none.
 */
function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    const start = path.indexOf(node);
    if (start >= 0) return [...path.slice(start), node];
    if (done.has(node)) return undefined;
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle !== undefined) return cycle;
    }
    path.pop();
    done.add(node);
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node);
    if (cycle !== undefined) return cycle;
  }
  return undefined;
}

/** A readable report of a cycle: the nodes, then the imports that make each edge. */
function describeCycle(imports: readonly Import[], cycle: readonly string[]): string {
  const lines = [cycle.join(' -> ')];
  for (const [i, from] of cycle.slice(0, -1).entries()) {
    const to = cycle[i + 1] as string;
    for (const line of importsBetween(imports, from, [to])) lines.push(`  ${line}`);
  }
  return lines.join('\n');
}

/** The imports of `src/`, read once for every test of this file. */
const IMPORTS = srcImports();

describe('the folders of src/', () => {
  it('import each other without a cycle', () => {
    const cycle = findCycle(graphOf(IMPORTS));
    expect(cycle && describeCycle(IMPORTS, cycle)).toBeUndefined();
  });
});

describe('the architecture check', () => {
  it('reads static, type-only and re-export declarations, not dynamic imports', () => {
    const text = [
      "import { a } from './a.js';",
      "import type { B } from '../b.js';",
      "import '../c.js';",
      "export { d } from './d.js';",
      "export type * from '../e.js';",
      "const f = await import('./f.js');",
    ].join('\n');
    expect(moduleSpecifiers('x.ts', text)).toEqual([
      './a.js',
      '../b.js',
      '../c.js',
      './d.js',
      '../e.js',
    ]);
  });

  it('names folders by their first segment and top-level files by their .ts name', () => {
    expect(nodeOf(join(SRC, 'hooks', 'dispatch.ts'))).toBe('hooks');
    expect(nodeOf(join(SRC, 'store', 'migrations', 'index.js'))).toBe('store');
    expect(nodeOf(join(SRC, 'errors.js'))).toBe('errors.ts');
    expect(nodeOf(join(SRC, '..', 'gen', 'x.js'))).toBeUndefined();
  });

  it('finds a cycle and reports the imports that make it', () => {
    const cyclic: Import[] = [
      { file: 'src/a/x.ts', specifier: '../b/y.js', from: 'a', to: 'b' },
      { file: 'src/b/y.ts', specifier: '../c.js', from: 'b', to: 'c.ts' },
      { file: 'src/c.ts', specifier: './a/x.js', from: 'c.ts', to: 'a' },
      { file: 'src/c.ts', specifier: './d/z.js', from: 'c.ts', to: 'd' },
    ];
    const cycle = findCycle(graphOf(cyclic));
    expect(cycle).toEqual(['a', 'b', 'c.ts', 'a']);
    expect(describeCycle(cyclic, cycle as string[])).toBe(
      [
        'a -> b -> c.ts -> a',
        '  src/a/x.ts -> ../b/y.js',
        '  src/b/y.ts -> ../c.js',
        '  src/c.ts -> ./a/x.js',
      ].join('\n'),
    );
    expect(findCycle(graphOf(cyclic.filter((i) => i.to !== 'a')))).toBeUndefined();
  });

  it('keeps src/server a transport edge: it imports no store, delivery or users module', () => {
    expect(importsBetween(IMPORTS, 'server', ['store', 'delivery', 'users'])).toEqual([]);
  });

  it('finds the imports of the real sources', () => {
    // Guards against a reader that finds nothing, with which the cycle check would pass.
    expect(importsBetween(IMPORTS, 'hooks', ['delivery'])).toContain(
      'src/hooks/dispatch.ts -> ../delivery/payload.js',
    );
  });
});

/**
 * Object literals that start with a spread and go on with more properties
 * (`{ ...base, key: value }`), as `file:line`. On Node 20 each evaluation
 * builds a new hidden class (see `src/extend.ts`).
 */
function spreadThenProperties(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isObjectLiteralExpression(node) &&
      node.properties.length > 1 &&
      node.properties[0] !== undefined &&
      ts.isSpreadAssignment(node.properties[0])
    ) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      found.push(`${relative(resolve(SRC, '..'), fileName)}:${line + 1}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('hot-path object copies', () => {
  it('finds the pattern it forbids', () => {
    const sample = 'const a = { ...b, c: 1 };\nconst d = { c: 1, ...b };\nconst e = { ...b };\n';
    expect(spreadThenProperties(join(SRC, 'sample.ts'), sample)).toEqual(['src/sample.ts:1']);
  });

  it('src/ has no object literal that spreads first and adds properties (use extend())', () => {
    const found = sourceFiles(SRC).flatMap((file) =>
      spreadThenProperties(file, readFileSync(file, 'utf8')),
    );
    expect(found).toEqual([]);
  });
});
