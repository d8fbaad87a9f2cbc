// Every manifest shipped in examples/ is valid: the README's commands must work as written.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXAMPLES_DIR } from '../paths.js';
import { parseManifests, readSources } from './manifest.js';

describe('examples/', () => {
  const files = readdirSync(EXAMPLES_DIR).filter((f) => f.endsWith('.yaml'));
  it('has examples', () => expect(files).toContain('hello.yaml'));
  it.each(files)('%s is a valid manifest', (f) => {
    expect(parseManifests(readSources([join(EXAMPLES_DIR, f)]), { kinds: ['Deployment'] }).length).toBeGreaterThan(0);
  });
});
