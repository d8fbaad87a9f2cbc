// Helpers of the node-agent's end-to-end tests: desired keys written straight into the store with
// the ReplicaDesired shape (no scheduler), waits on observed state, the agent's metrics.
import { readFileSync } from 'node:fs';
import { keys } from '../../src/api/keys.js';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type ReplicaAddress, type ReplicaCommand, type ReplicaDesired, type ReplicaObserved, type ServiceSpec } from '../../src/api/types.js';
import type { Store } from '../../src/store/store.js';
import { commitActs } from '../../src/store/writer.js';
import type { Proc } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

export const IMAGE = 'jaco-demo/busybox:1';
export const IMAGE_2 = 'jaco-demo/busybox:2';
/** A container that idles; sleep as PID 1 ignores SIGTERM, so a short grace keeps stops quick. */
export const SLEEPER: ServiceSpec = { image: IMAGE, command: ['sleep', '3600'], stopGracePeriod: '1s' };
export { UNPULLABLE } from '../support/images.js';

export interface DesiredOptions {
  deployment?: string;
  service?: string;
  revision?: number;
  suspended?: { reason: string; at: string };
  /** A cluster-network replica's addresses, as the scheduler's IPAM would allocate them. */
  address?: ReplicaAddress;
}

/** A desired replica as the scheduler would write it (template with defaults, its spec hash). */
export function desired(node: string, replica: string, spec: ServiceSpec, o: DesiredOptions = {}): ReplicaDesired {
  const t = templateOf(o.revision ?? 1, spec);
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: replica },
    spec: {
      replica,
      deployment: o.deployment ?? 'demo',
      service: o.service ?? 'web',
      node,
      revision: t.revision,
      specHash: t.specHash,
      template: t.template,
      placedAt: new Date().toISOString(),
      ...(o.suspended ? { suspended: o.suspended } : {}),
      ...(o.address ? { address: o.address } : {}),
    },
  };
}

export async function putDesired(store: Store, ...ds: ReplicaDesired[]): Promise<void> {
  await commitActs(store, ds.map((d) => ({ ops: [{ op: 'put', key: keys.desired(d.spec.node, d.spec.replica), value: d }] })));
}

export async function deleteDesired(store: Store, node: string, replica: string): Promise<void> {
  await commitActs(store, [{ ops: [{ op: 'delete', key: keys.desired(node, replica) }] }]);
}

export async function putCommand(store: Store, node: string, replica: string, seq: number): Promise<void> {
  const cmd: ReplicaCommand = {
    apiVersion: API_VERSION,
    kind: 'ReplicaCommand',
    metadata: { name: replica },
    spec: { replica, op: 'restart', seq, issuedAt: new Date().toISOString(), reason: 'test' },
    status: { restarts: 1, generation: 1 },
  };
  await commitActs(store, [{ ops: [{ op: 'put', key: keys.command(node, replica), value: cmd }] }]);
}

export async function observedStatus(store: Store, node: string, replica: string): Promise<ReplicaObserved['status'] | undefined> {
  return (await store.get<ReplicaObserved>(keys.observed(node, replica)))?.value.status;
}

/** Waits until observed/<node>/<replica> satisfies `ok`; the error names the last status seen. */
export async function waitObserved(
  store: Store,
  node: string,
  replica: string,
  ok: (s: NonNullable<ReplicaObserved['status']>) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<NonNullable<ReplicaObserved['status']>> {
  let last: unknown;
  try {
    return await eventually(
      async () => {
        const s = await observedStatus(store, node, replica);
        last = s;
        return s && ok(s) ? s : undefined;
      },
      { what: `${replica} on ${node}: ${what}`, timeoutMs, intervalMs: 150 },
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; last observed: ${JSON.stringify(last)}`);
  }
}

/** The /metrics URL an agent logged ("node-agent running"), for --metrics-addr 127.0.0.1:0. */
export async function metricsUrl(p: Proc): Promise<string> {
  return eventually(
    () => {
      for (const line of readFileSync(p.logFile, 'utf8').split('\n')) {
        if (!line.includes('node-agent running')) continue;
        const m = /"metrics":"([^"]+)"/.exec(line);
        if (m) return m[1];
      }
      return undefined;
    },
    { what: `${p.name} logging its metrics address`, timeoutMs: 30_000 },
  );
}

/** One metric's value from a Prometheus text page (labels as written, e.g. 'result="failure"'). */
export async function metric(url: string, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(url)).text();
  const want = labels ? `${name}{${labels}}` : name;
  for (const line of text.split('\n')) if (line.startsWith(`${want} `)) return Number(line.slice(want.length + 1));
  return undefined;
}

