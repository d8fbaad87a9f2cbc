// Every manifest shipped in examples/ is valid: the README's commands must work as written.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXAMPLES_DIR } from '../paths.js';
import { parseManifests, readSources } from './manifest.js';
import { composeSource, loadCompose } from '../compose/load.js';

describe('examples/', () => {
  const files = readdirSync(EXAMPLES_DIR).filter((f) => f.endsWith('.yaml'));
  it('has examples', () => expect(files).toContain('hello.yaml'));
  it.each(files)('%s is a valid manifest', (f) => {
    expect(parseManifests(readSources([join(EXAMPLES_DIR, f)]), { kinds: ['Deployment'] }).length).toBeGreaterThan(0);
  });
});

describe('examples/*/compose.yaml', () => {
  const apps = readdirSync(EXAMPLES_DIR, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  it('has a compose example', () => expect(apps).toContain('shop'));
  it.each(apps)('%s/compose.yaml loads with no warning', (app) => {
    const file = join(EXAMPLES_DIR, app, 'compose.yaml');
    const loaded = loadCompose(composeSource(file, readFileSync(file, 'utf8')));
    expect(loaded.warnings).toEqual([]);
    expect(loaded.deployment.metadata.name).toBe(app);
  });
});
