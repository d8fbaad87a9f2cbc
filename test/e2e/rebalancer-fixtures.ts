// Shared by the rebalancer's end-to-end tests: where the rebalancer leader serves /metrics (its
// election key advertises it), its audit records, and the CLI with a clear failure message.
import { keys } from '../../src/api/keys.js';
import type { AuditEvent } from '../../src/api/types.js';
import { rebalancerLeader } from '../../src/app/rebalance-plan.js';
import type { TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

export { metric } from './agent-fixtures.js';

/** The rebalancer leader's /metrics URL, from the "metrics=<url>" in its election key. */
export async function rebalancerMetricsUrl(c: TestCluster): Promise<string> {
  return eventually(
    async () => {
      const id = await rebalancerLeader(c.store);
      const url = id && /\bmetrics=(\S+)/.exec(id)?.[1];
      return url ? `${url}/metrics` : undefined;
    },
    { what: 'a rebalancer leader advertising its metrics address', timeoutMs: 30_000 },
  );
}

/** Audit records written by the rebalancer (any type), oldest first. */
export async function rebalancerAudit(c: TestCluster): Promise<AuditEvent['spec'][]> {
  const { items } = await c.store.list<AuditEvent>(keys.audits());
  return items.map((i) => i.value.spec).filter((s) => s.actor === 'rebalancer');
}

export async function cli(c: TestCluster, args: string[]): Promise<string> {
  const r = await c.jaco(args);
  if (r.code !== 0) throw new Error(`jaco ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

