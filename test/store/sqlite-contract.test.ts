/**
 * @module The store contract (`./contract.ts`) on the SQLite store: a fresh
 * file in a temporary folder per test.
 */
import { describeStoreContract } from './contract.js';
import { useTempStore } from './helpers.js';

const temp = useTempStore();

describeStoreContract('SQLite', {
  open: async () => temp.open(),
  exec: async (sql) => {
    temp.raw().exec(sql);
  },
  bytesLiteral: (hex) => `X'${hex}'`,
  table: (name) => name,
});
