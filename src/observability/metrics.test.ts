// docs/observability.md lists every jaco_* metric any process registers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import '../../controllers/index.js';
import '../../controllers/node-agent/metrics.js';
import { PACKAGE_ROOT } from '../paths.js';
import { registry } from './metrics.js';

describe('docs/observability.md', () => {
  const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'observability.md'), 'utf8');
  const names = registry
    .getMetricsAsArray()
    .map((m) => m.name)
    .filter((n) => n.startsWith('jaco_') && !n.startsWith('jaco_process_'));
  it('finds the metrics', () => expect(names.length).toBeGreaterThan(30));
  it.each(names)('documents %s', (n) => expect(doc).toContain(`| \`${n}\` |`));
});
