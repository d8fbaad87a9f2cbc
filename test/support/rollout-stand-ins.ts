// What the scheduler and the node-agents would write, for tests of the rollout controller on a real
// etcd without Docker (test/integration/rollout-cli, test/e2e/rollout-etcd): heartbeats, replicas
// placed at the serving template, and observed state that follows each desired spec change.
import { keys } from '../../src/api/keys.js';
import { servingTemplate } from '../../src/api/serving.js';
import { API_VERSION, type Deployment, type DeploymentRevision, type Heartbeat, type ReplicaDesired, type ReplicaObserved, type RolloutPlan } from '../../src/api/types.js';
import { Informer } from '../../src/store/informer.js';
import type { Store } from '../../src/store/store.js';
import { commitActs } from '../../src/store/writer.js';
import { testLogger } from './log.js';

const put = (store: Store, key: string, value: unknown) => commitActs(store, [{ ops: [{ op: 'put', key, value }] }]);

/** A fresh heartbeat of every node, each promising the next within `intervalMs`. */
export async function putHeartbeats(store: Store, nodes: readonly string[], intervalMs: number): Promise<void> {
  for (const node of nodes) {
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name: node }, spec: { node, time: new Date().toISOString(), intervalMs, agentVersion: 'test', dockerUp: true } };
    await put(store, keys.heartbeat(node), hb);
  }
}

/**
 * Stand-ins for the node-agents: a replica whose desired spec changes is reported `starting`
 * (start-first: the old container keeps serving), then `running` and healthy after `opts.startMs`
 * (read when each replica starts, so a test may change it). Images on the closed loopback registry
 * (127.0.0.1:5999/…) never pull; images with "/slow:" in the name never become ready.
 */
export function standInAgents(store: Store, opts: { startMs: number }): { start(): Promise<void>; stop(): Promise<void> } {
  const inf = new Informer<ReplicaDesired>(store, keys.desiredOf(), { kind: 'ReplicaDesired', log: testLogger() });
  const timers = new Set<NodeJS.Timeout>();
  const writes = new Map<string, Promise<unknown>>();
  const observe = (d: ReplicaDesired, status: Partial<NonNullable<ReplicaObserved['status']>>) => {
    const s = d.spec;
    const o: ReplicaObserved = {
      apiVersion: API_VERSION,
      kind: 'ReplicaObserved',
      metadata: { name: s.replica },
      status: { replica: s.replica, node: s.node, deployment: s.deployment, service: s.service, state: 'running', revision: s.revision, specHash: s.specHash, health: 'healthy', startedAt: new Date().toISOString(), observedAt: new Date().toISOString(), ...status },
    };
    // One replica's reports are written in order, each after the last has landed: two puts in
    // flight at once may land in either order, and a "starting" landing after "running" would hold
    // the step until its timeout. A write lost at teardown (the store closing) is no finding; one
    // lost mid-test shows as a timeout.
    const key = keys.observed(s.node, s.replica);
    const next = (writes.get(key) ?? Promise.resolve()).then(() => put(store, key, o)).catch(() => undefined);
    writes.set(key, next);
  };
  const current = new Map<string, { revision: number; specHash: string }>();
  inf.on('change', (c) => {
    if (c.type !== 'put' || !c.value) return;
    const d = c.value.value;
    const k = c.key;
    const prev = current.get(k);
    if (prev?.specHash === d.spec.specHash && prev.revision === d.spec.revision) return;
    current.set(k, { revision: d.spec.revision, specHash: d.spec.specHash });
    const replacing = prev ? { replacing: { revision: prev.revision, specHash: prev.specHash, containerId: 'old', state: 'running' as const } } : {};
    if (d.spec.template.image.startsWith('127.0.0.1:5999/')) {
      // What a real agent reports for a closed registry (classifyPullError of "connection refused").
      observe(d, { state: 'pending', code: 'registry_unreachable', health: 'none', details: `${d.spec.template.image}: connection refused`, ...replacing });
      return;
    }
    observe(d, { state: 'starting', health: 'starting', ...replacing });
    if (d.spec.template.image.includes('/slow:')) return;
    const t = setTimeout(() => {
      timers.delete(t);
      const now = current.get(k);
      if (now?.specHash === d.spec.specHash && now.revision === d.spec.revision) observe(d, {});
    }, opts.startMs);
    timers.add(t);
  });
  return {
    start: () => inf.start(),
    async stop() {
      for (const t of timers) clearTimeout(t);
      await inf.stop();
      await Promise.all(writes.values());
    },
  };
}

/** What the scheduler would do: `n` replicas of dep/service at the serving template, over `nodes` in turn. */
export async function placeReplicas(store: Store, nodes: readonly string[], dep = 'app', service = 'web', n = 3): Promise<void> {
  const d = (await store.get<Deployment>(keys.deployment(dep)))!.value;
  const plan = (await store.get<RolloutPlan>(keys.rollout(dep, service)))?.value;
  const revs = new Map((await store.list<DeploymentRevision>(keys.revisions(dep))).items.map((i) => [i.value.spec.revision, i.value]));
  const t = servingTemplate(d, service, plan, (r) => revs.get(r))!;
  for (let i = 0; i < n; i++) {
    const id = `${dep}-${service}-${i}`;
    const node = nodes[i % nodes.length]!;
    const rd: ReplicaDesired = {
      apiVersion: API_VERSION,
      kind: 'ReplicaDesired',
      metadata: { name: id },
      spec: { replica: id, deployment: dep, service, node, index: i, revision: t.revision, specHash: t.specHash, template: t.template, placedAt: new Date().toISOString() },
    };
    await commitActs(store, [{ ops: [{ op: 'create', key: keys.desired(node, id), value: rd }] }]);
  }
}
