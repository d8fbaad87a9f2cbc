// The validators compiled at build time (ajv's standalone code, scripts/build-validators.mjs) judge
// exactly as the ones compiled at run time: the same verdicts, the same errors, the same pruning —
// and a file made from another schema is never used.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { ValidateFunction } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../paths.js';
import { COMPOSE_VALIDATOR, compileComposeValidator, composeSchema, composeValidatorCode } from '../compose/schema.js';
import { newAjv, precompiledName, SchemaRegistry, standaloneValidator } from './schema.js';
import { withDefaults } from './spec.js';

// Where the generated code finds ajv's runtime, as under dist/ (a tool cache of node_modules).
mkdirSync(join(PACKAGE_ROOT, 'node_modules', '.cache'), { recursive: true });
const dir = mkdtempSync(join(PACKAGE_ROOT, 'node_modules', '.cache', 'jaco-validators-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const require = createRequire(import.meta.url);
const registry = new SchemaRegistry();

function both(kind: string, reading: boolean): [ValidateFunction, ValidateFunction] {
  const schema = registry.schemaOf(kind)!;
  const file = join(dir, precompiledName(kind, reading, schema));
  writeFileSync(file, standaloneValidator(schema, reading));
  return [newAjv(reading).compile(schema), (require(file) as { default: ValidateFunction }).default];
}

const template = withDefaults({ image: 'jaco-demo/busybox:1', command: ['sleep', '1'], replicas: 2, ports: [{ name: 'http', containerPort: 80, published: 8080 }] });
const deployment = (services: Record<string, unknown>) => ({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'web', generation: 1 }, spec: { services } });
const desired = (extra: Record<string, unknown> = {}) => ({
  apiVersion: 'jaco.dev/v1',
  kind: 'ReplicaDesired',
  metadata: { name: 'web-web-0' },
  spec: { replica: 'web-web-0', deployment: 'web', service: 'web', node: 'n1', index: 0, revision: 1, specHash: 'a'.repeat(64), template, placedAt: '2026-11-28T00:00:00.000Z', ...extra },
});

/** What it is, its kind, the value, and whether writing it is valid. */
const CASES: [string, string, unknown, boolean][] = [
  ['a valid deployment', 'Deployment', deployment({ web: { image: 'busybox:1', replicas: 3, resources: { cpu: '500m', memory: '64Mi' } } }), true],
  ['an unknown field', 'Deployment', deployment({ web: { image: 'busybox:1', newField: true } }), false],
  ['a wrong type and a missing image', 'Deployment', deployment({ web: { replicas: 'three' } }), false],
  ['a quantity that is neither', 'Deployment', deployment({ web: { image: 'a', resources: { memory: { x: 1 } } } }), false],
  ['a port out of range', 'Deployment', deployment({ web: { image: 'a', ports: [0] } }), false],
  ['a bad date-time', 'ReplicaDesired', desired({ placedAt: 'yesterday' }), false],
  ['a valid replica', 'ReplicaDesired', desired(), true],
  ['a replica from a newer jaco', 'ReplicaDesired', desired({ futureField: { a: 1 } }), false],
];

const shape = (errors: ValidateFunction['errors']) => (errors ?? []).map((e) => [e.instancePath, e.keyword, e.message, e.schemaPath]);

describe('validators compiled at build time', () => {
  it.each(CASES)('%s: the same verdict, errors and pruning as compiled at run time', (_what, kind, value, valid) => {
    for (const reading of [false, true]) {
      const [runtime, built] = both(kind, reading);
      const a = structuredClone(value);
      const b = structuredClone(value);
      const verdict = built(b);
      expect(verdict).toBe(runtime(a));
      if (!reading) expect(verdict).toBe(valid);
      expect(shape(built.errors)).toEqual(shape(runtime.errors));
      expect(b).toEqual(a); // reading prunes alike
    }
  });

  it('names each file by the hash of its schema: another schema, another file', () => {
    const schema = registry.schemaOf('Deployment')!;
    expect(precompiledName('Deployment', false, schema)).toMatch(/^write-Deployment-[0-9a-f]{16}\.cjs$/);
    expect(precompiledName('Deployment', true, schema)).toMatch(/^read-Deployment-/);
    expect(precompiledName('Deployment', false, { ...schema, description: 'changed' })).not.toBe(precompiledName('Deployment', false, schema));
  });
});

/** Compose files as the loader hands them to the schema (interpolated, merged), and whether each is valid. */
const COMPOSE_CASES: [string, unknown, boolean][] = [
  ['a valid file', { services: { web: { image: 'nginx:1', ports: ['8080:80'], environment: { A: '1' }, deploy: { replicas: 2 } } }, volumes: { data: {} } }, true],
  ['an unknown service field', { services: { web: { image: 'nginx:1', imagee: 'x' } } }, false],
  ['a wrong type', { services: { web: { image: 'nginx:1', deploy: { replicas: [2] } } } }, false],
  ['environment in neither form', { services: { web: { image: 'nginx:1', environment: 5 } } }, false],
  ['a port in no allowed form', { services: { web: { image: 'nginx:1', ports: [{ target: 80, protocol: 5 }] } } }, false],
  ['an unknown top-level key', { services: {}, servicez: {} }, false],
];

describe("the Compose Specification's validator compiled at build time", () => {
  const file = join(dir, precompiledName(COMPOSE_VALIDATOR, false, composeSchema()));
  writeFileSync(file, composeValidatorCode());
  const built = (require(file) as { default: ValidateFunction }).default;
  const runtime = compileComposeValidator();

  it.each(COMPOSE_CASES)('%s: the same verdict and errors as compiled at run time', (_what, value, valid) => {
    expect(built(value)).toBe(valid);
    expect(runtime(value)).toBe(valid);
    expect(shape(built.errors)).toEqual(shape(runtime.errors));
  });
});
