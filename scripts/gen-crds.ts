// Writes crds/<plural>.yaml from src/api/crds.ts. Run after changing a schema: npm run gen:crds
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderCrds } from '../src/api/crd-files.js';
import { CRDS_DIR } from '../src/paths.js';

mkdirSync(CRDS_DIR, { recursive: true });
for (const [file, text] of renderCrds()) writeFileSync(join(CRDS_DIR, file), text);
console.log(`wrote ${renderCrds().size} CRDs to ${CRDS_DIR}`);
