import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CRDS_DIR } from '../paths.js';
import { renderCrds } from './crd-files.js';
import { crdDefinitions } from './crds.js';
import { schemas } from './schema.js';

describe('crds/', () => {
  it('matches src/api/crds.ts (run `npm run gen:crds` after changing a schema)', () => {
    const rendered = renderCrds();
    expect(readdirSync(CRDS_DIR).filter((f) => f.endsWith('.yaml')).sort()).toEqual([...rendered.keys()].sort());
    for (const [file, text] of rendered) expect(readFileSync(join(CRDS_DIR, file), 'utf8'), file).toBe(text);
  });

  it('read back, the files are the very schemas validation compiles in memory (schema.ts)', () => {
    const files = readdirSync(CRDS_DIR).filter((f) => f.endsWith('.yaml')).map((f) => parse(readFileSync(join(CRDS_DIR, f), 'utf8')) as { spec: { names: { kind: string } } });
    const byKind = (xs: { spec: { names: { kind: string } } }[]) => Object.fromEntries(xs.map((c) => [c.spec.names.kind, c]));
    expect(byKind(files)).toEqual(byKind(schemas().crds));
  });

  it('holds valid apiextensions.k8s.io/v1 structural schemas', () => {
    const walk = (s: Record<string, unknown>, path: string) => {
      // Structural schemas: properties and additionalProperties are mutually exclusive, every
      // node has a type unless it is int-or-string or preserves unknown fields.
      if (s.properties) expect(s.additionalProperties, path).toBeUndefined();
      if (!s['x-kubernetes-int-or-string'] && !s['x-kubernetes-preserve-unknown-fields']) expect(s.type, path).toBeDefined();
      for (const [k, v] of Object.entries((s.properties as Record<string, Record<string, unknown>>) ?? {})) walk(v, `${path}.${k}`);
      if (s.items) walk(s.items as Record<string, unknown>, `${path}[]`);
      if (s.additionalProperties && typeof s.additionalProperties === 'object') walk(s.additionalProperties as Record<string, unknown>, `${path}{}`);
    };
    for (const crd of crdDefinitions()) {
      expect(crd.metadata?.name).toBe(`${crd.spec.names.plural}.jaco.dev`);
      expect(crd.spec.versions).toHaveLength(1);
      walk(crd.spec.versions[0]!.schema!.openAPIV3Schema as Record<string, unknown>, crd.spec.names.kind);
    }
  });
});
