#!/usr/bin/env node
// Bundles the compiled entry point dist/src/main.js, in place, into one
// minified module with its dependencies: the sidecar that `npm start`, the
// image, the tests and the bench run. V8 keeps every loaded module's source
// text and bytecode alive, so one minified module with only the code that is
// reachable leaves a smaller live heap (about 5 MB less at start, see
// BENCHMARKS.md), and the heap's growth before a full GC can be larger
// within the same RSS. The bundle sits where main.js sat, so paths resolved
// from `import.meta.url` in src/main.ts and src/descriptor-set.ts still hold.
// Native and optional modules stay outside: better-sqlite3 (a compiled addon)
// and pg-native (which pg only tries). So does OpenTelemetry: src/tracing
// imports it dynamically, only when the OTEL_* variables turn tracing on, so
// a sidecar without tracing neither parses nor keeps its half a megabyte.
import { build } from 'esbuild';

const ENTRY = 'dist/src/main.js';

await build({
  entryPoints: [ENTRY],
  outfile: ENTRY,
  allowOverwrite: true,
  bundle: true,
  // Whitespace and syntax only: identifiers keep their names, so stack
  // traces in the log still read (the minified identifiers would save about
  // 2 MB more heap). No keepNames: it wraps every function expression in a
  // `__name(fn, 'name')` call that runs each time the closure is made, an
  // Object.defineProperty per closure per call; without it a decision costs
  // 12-25% less server CPU (BENCHMARKS.md). A name esbuild had to change to
  // avoid a collision between modules (`foo2`) reads so in a stack trace.
  minifyWhitespace: true,
  minifySyntax: true,
  platform: 'node',
  format: 'esm',
  // Node 20, as .nvmrc and the image pin it.
  target: 'node20',
  external: ['better-sqlite3', 'pg-native', '@opentelemetry/*'],
  // The CommonJS dependencies call require() for Node's modules; an ES module has none.
  banner: {
    js: "import { createRequire as __agenthooksCreateRequire } from 'node:module'; const require = __agenthooksCreateRequire(import.meta.url);",
  },
  // A source map beside the bundle, not linked from it (Node never reads
  // it): the bench's profiles map the bundle's functions back to their
  // modules through it (src/..., undici/..., node_modules/...). The image
  // leaves it out.
  sourcemap: 'external',
  sourcesContent: false,
  logLevel: 'warning',
  // 2.5 MB is expected: the dependencies are the point.
  logOverride: { 'large-file': 'silent' },
});
