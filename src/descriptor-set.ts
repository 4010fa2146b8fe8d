/**
 * @module Where the descriptor set that server reflection serves lives: the
 * descriptor set of every file in proto/ and its imports, with source info.
 * It is resolved from this module, which sits directly in `src/` (and
 * `dist/src/`), the folder the bundled entry point `dist/src/main.js` also
 * sits in, so the path holds in the sources, the compiled modules and the
 * bundle alike: gen/descriptors.binpb beside src/, dist/gen/descriptors.binpb
 * beside dist/src/.
 */

/** Location of `descriptors.binpb` (`npm run generate` writes it, `npm run build` copies it). */
export const DESCRIPTOR_SET_URL: URL = new URL('../gen/descriptors.binpb', import.meta.url);
