// docs/audit.md lists every audit type: the page and the code must not drift apart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../paths.js';
import { AUDIT_TYPES } from './reasons/audit.js';

describe('docs/audit.md', () => {
  const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'audit.md'), 'utf8');
  it.each(Object.keys(AUDIT_TYPES))('documents %s', (t) => expect(doc).toContain(`| \`${t}\` |`));
});
