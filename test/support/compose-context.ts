// Test helper: the context a table maps compose with — project shop in /app, no variables, no
// profiles, no --allow-privileged, and no file to read (a row that reads one fails, naming it).
import type { MapContext } from '../../src/compose/map.js';

export const tableContext: MapContext = {
  dir: '/app',
  project: 'shop',
  lookup: () => undefined,
  profiles: [],
  allowPrivileged: false,
  readFile: (f) => {
    throw new Error(`no file ${f} in a table`);
  },
};
