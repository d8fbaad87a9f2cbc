// The queries an operator is given (deploy/grafana's dashboard, deploy/prometheus's alerting
// rules) name only metrics some jaco process exports: a renamed metric fails here, not on a
// silent dashboard panel in production.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../paths.js';
import { registry } from './metrics.js';
// Every process kind's metrics register in the one registry at import.
import '../../controllers/index.js';
import '../../controllers/node-agent/metrics.js';
import '../../controllers/ingress/ingress.js';

/** The jaco metric names an expression uses (a histogram's series by its name). */
function namesIn(text: string): string[] {
  return [...new Set([...text.matchAll(/\bjaco_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, '')))].sort();
}

describe('the deploy/ queries', () => {
  const exported = new Set(registry.getMetricsAsArray().map((m) => m.name));

  // The whole text: a panel nested in a row, a template variable's query, an annotation count too.
  it.each(['deploy/grafana/jaco-dashboard.json', 'deploy/prometheus/jaco-rules.yml'])('%s names only metrics jaco exports', (file) => {
    const names = namesIn(readFileSync(join(PACKAGE_ROOT, file), 'utf8'));
    expect(names.length).toBeGreaterThan(5);
    expect(names.filter((n) => !exported.has(n))).toEqual([]);
  });
});
