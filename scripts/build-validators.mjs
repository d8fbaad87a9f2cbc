#!/usr/bin/env node
// Compiles every kind's schema (both modes: writing and reading), and the Compose Specification's,
// into ajv's standalone code under dist/validators/, so no jaco process compiles a schema at run
// time (src/api/schema.ts uses a file only when its name carries the hash of the schema the running
// code would compile). Part of the build (npm run build, which make build and scripts/test.sh run);
// it reads the TypeScript sources through tsx: `node --import tsx scripts/build-validators.mjs`.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { precompiledName, PRECOMPILED_DIR, SchemaRegistry, standaloneValidator } = await import(join(root, 'src', 'api', 'schema.ts'));
const { COMPOSE_VALIDATOR, composeSchema, composeValidatorCode } = await import(join(root, 'src', 'compose', 'schema.ts'));

rmSync(PRECOMPILED_DIR, { recursive: true, force: true });
mkdirSync(PRECOMPILED_DIR, { recursive: true });
const registry = new SchemaRegistry();
let files = 0;
for (const kind of registry.kinds()) {
  const schema = registry.schemaOf(kind);
  for (const reading of [false, true]) {
    writeFileSync(join(PRECOMPILED_DIR, precompiledName(kind, reading, schema)), standaloneValidator(schema, reading));
    files++;
  }
}
// The Compose Specification's schema too (src/compose/schema.ts): compiling it costs a `jaco apply`
// of a compose file ~0.3 s.
const compose = composeSchema();
writeFileSync(join(PRECOMPILED_DIR, precompiledName(COMPOSE_VALIDATOR, false, compose)), composeValidatorCode(compose));
files++;
console.log(`build-validators: ${files} validators of ${registry.kinds().length} kinds and the Compose Specification in ${PRECOMPILED_DIR.slice(root.length + 1)}/`);
