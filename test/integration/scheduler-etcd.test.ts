// The scheduler against a real etcd (no Docker): apply → desired keys with their decisions,
// counter, status and endpoints; scale and delete; node loss; and a leader change in the middle
// of a pass that must write nothing twice.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type AuditEvent, type DeploymentSpec, type DeploymentStatus, type Endpoints, type Heartbeat, type Node, type PlacementDecision, type ReplicaCounter, type ReplicaDesired } from '../../src/api/types.js';
import { applyDeployments, deleteDeployments } from '../../src/app/apply.js';
import type { Act } from '../../src/runtime/acts.js';
import { startController } from '../../src/runtime/manager.js';
import { metrics } from '../../src/observability/metrics.js';
import { commitAtomic } from '../../src/store/writer.js';
import type { Store } from '../../src/store/store.js';
import { FAST } from '../../src/timings.js';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import { startTestEtcd, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

let etcd: TestEtcd;
const handles: { stop(): Promise<void> }[] = [];
beforeAll(async () => {
  etcd = await startTestEtcd();
});
afterEach(async () => {
  await Promise.all(handles.splice(0).map((h) => h.stop()));
});
afterAll(async () => {
  await etcd?.stop();
});

function nodeObj(name: string, memory = 8 * 1024 ** 3): Node {
  return { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: {} }, spec: {}, status: { capacity: { cpuMillis: 2000, memoryBytes: memory, gpus: 0 }, agentVersion: 'test', registeredAt: new Date().toISOString() } };
}
function heartbeat(name: string): Heartbeat {
  // A long interval keeps it fresh for the whole test without an agent.
  return { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: new Date().toISOString(), intervalMs: 60_000, agentVersion: 'test', dockerUp: true } };
}

async function cluster(store: Store, nodes: string[]): Promise<void> {
  await commitAtomic(store, [{ ops: nodes.flatMap((n) => [{ op: 'put' as const, key: keys.node(n), value: nodeObj(n) }, { op: 'put' as const, key: keys.heartbeat(n), value: heartbeat(n) }]) }]);
}

async function scheduler(store: Store, identity: string, beforeCommit?: (acts: readonly Act[]) => Promise<void>) {
  const h = await startController({ store, timings: FAST, log: testLogger(), identity, beforeCommit }, schedulerController(FAST));
  handles.push(h);
  return h;
}

const apply = (store: Store, name: string, spec: DeploymentSpec) => applyDeployments(store, [{ name, spec, cause: 'apply' }]);
const desired = async (store: Store) => (await store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value);

describe('scheduler on etcd', () => {
  it('apply → desired keys, decisions, counters, status and endpoints; scale down; delete cleans up', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2', 'node-3']);
    await scheduler(store, 'a');
    await apply(store, 'shop', {
      services: {
        web: { image: 'jaco-demo/busybox:1', replicas: 3 },
        worker: { image: 'jaco-demo/busybox:1', replicas: 2, placement: { mode: 'pack' } },
        agent: { image: 'jaco-demo/busybox:1', placement: { mode: 'global' } },
      },
    });
    const all = await eventually(async () => {
      const d = await desired(store);
      return d.length === 8 ? d : undefined;
    }, { what: '8 desired keys' });
    const web = all.filter((d) => d.spec.service === 'web');
    expect(new Set(web.map((d) => d.spec.node)).size).toBe(3);
    expect(all.filter((d) => d.spec.service === 'worker').map((d) => d.spec.node)).toEqual(['node-1', 'node-2']);
    expect(all.filter((d) => d.spec.service === 'agent').map((d) => d.spec.replica).sort()).toEqual(['shop-agent-node-1', 'shop-agent-node-2', 'shop-agent-node-3']);
    expect((await store.get<ReplicaCounter>(keys.counter('shop', 'web')))!.value.spec.next).toBe(3);
    expect((await store.list<PlacementDecision>(keys.decisions('shop'))).items).toHaveLength(8);
    const status = await eventually(async () => (await store.get<DeploymentStatus>(keys.deploymentStatus('shop')))?.value.status?.scheduling);
    expect(status.services).toEqual({ web: { desired: 3, placed: 3 }, worker: { desired: 2, placed: 2 }, agent: { desired: 3, placed: 3 } });
    expect((await store.list<Endpoints>(keys.endpointsAll())).items).toHaveLength(3);

    // Idle: nothing is rewritten.
    const rev = await store.ping();
    await new Promise((r) => setTimeout(r, FAST.safetyTickMs + 500));
    const after = (await store.list(keys.desiredOf())).items.concat((await store.list(keys.deploymentStatuses())).items, (await store.list(keys.endpointsAll())).items);
    expect(after.filter((i) => i.modRevision > rev)).toEqual([]);

    await apply(store, 'shop', { services: { web: { image: 'jaco-demo/busybox:1', replicas: 1 }, agent: { image: 'jaco-demo/busybox:1', placement: { mode: 'global' } } } });
    await eventually(async () => (await desired(store)).length === 4, { what: 'scale down to 4' });
    expect((await desired(store)).filter((d) => d.spec.service === 'web').map((d) => d.spec.replica)).toEqual(['shop-web-0']);

    await deleteDeployments(store, ['shop']);
    await eventually(async () => {
      for (const p of ['desired/', 'decisions/', 'counters/', 'endpoints/', 'deploymentstatus/']) if ((await store.countPrefix(p)) > 0) return false;
      return true;
    }, { what: 'everything of shop removed' });
    const audit = (await store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec);
    expect(audit.filter((a) => a.type === 'replica_placed')).toHaveLength(8);
    expect(audit.filter((a) => a.type === 'replica_removed')).toHaveLength(8);
  });

  it('a node NotReady past the grace: its stateless replica is re-placed under the same id in one transaction', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2']);
    const h = await scheduler(store, 'a');
    await apply(store, 'web', { services: { web: { image: 'jaco-demo/busybox:1', replicas: 2 } } });
    const before = await eventually(async () => {
      const d = await desired(store);
      return d.length === 2 ? d : undefined;
    });
    const victim = before.find((d) => d.spec.node === 'node-2')!;
    await store.ns.delete().key(keys.heartbeat('node-2'));
    const t0 = Date.now();
    const moved = await eventually(async () => {
      const d = (await desired(store)).filter((x) => x.spec.replica === victim.spec.replica);
      return d.length === 1 && d[0]!.spec.node === 'node-1' ? d[0] : undefined;
    }, { what: 'the replica re-placed on node-1', timeoutMs: 20_000 });
    // Not before the grace period.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(FAST.nodeLostGraceMs - 200);
    expect(moved.spec.index).toBe(victim.spec.index);
    expect(moved.spec.revision).toBe(victim.spec.revision);
    // The delete and the create landed in one transaction: same mod revision for both events.
    const audit = (await store.list<AuditEvent>(keys.audits())).items.filter((a) => a.value.spec.type === 'node_lost');
    expect(audit).toHaveLength(1);
    expect(audit[0]!.value.spec.payload).toMatchObject({ replica: victim.spec.replica, node: 'node-2', to: 'node-1' });
    const rec = (await store.get<ReplicaDesired>(keys.desired('node-1', victim.spec.replica)))!;
    expect(rec.createRevision).toBe(audit[0]!.createRevision);
    expect(h.runner.state.notReadySince.has('node-2')).toBe(true);
  });

  it('a leader change in the middle of a pass writes nothing twice', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2', 'node-3', 'node-4']);
    let gate: { reached: () => void; release: Promise<void> } | undefined;
    let reached!: Promise<void>;
    let release!: () => void;
    let placePasses = 0;
    const a = await scheduler(store, 'a', async (acts) => {
      if (!acts.some((x) => x.label.startsWith('place'))) return;
      // Hold the placing pass (all 100 replicas are decided in one pass): A has decided, not written.
      if (++placePasses !== 1) return;
      gate?.reached();
      await gate?.release;
    });
    await eventually(() => a.runner.leadership!.isLeader(), { what: 'A leading' });
    const b = await scheduler(store, 'b');
    reached = new Promise<void>((r) => {
      gate = { reached: r, release: new Promise<void>((rel) => (release = rel)) };
    });
    await apply(store, 'big', { services: { web: { image: 'jaco-demo/busybox:1', replicas: 100 } } });
    await reached;
    // A has decided its second batch but not written it: its lease goes (as if it had expired).
    const fence = a.runner.leadership!.fence()!;
    await store.revokeLease(fence.key.slice(fence.key.lastIndexOf('/') + 1));
    await eventually(() => b.runner.leadership!.isLeader(), { what: 'B leading', timeoutMs: 15_000 });
    // B finishes the job.
    await eventually(async () => (await desired(store)).length === 100, { what: '100 replicas', timeoutMs: 30_000 });
    // Now A's held pass commits with its stale fence: refused, nothing lands.
    const fenced = async () => (await metrics.reconcileErrors.get()).values.find((v) => v.labels.controller === 'scheduler' && v.labels.error === 'FencedError')?.value ?? 0;
    const fencedBefore = await fenced();
    release();
    await eventually(async () => (await fenced()) > fencedBefore, { what: "A's held write refused by the fence" });
    await new Promise((r) => setTimeout(r, 1000));

    const d = await desired(store);
    expect(d).toHaveLength(100);
    expect(d.map((x) => x.spec.index).sort((x, y) => x! - y!)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(new Set(d.map((x) => x.spec.replica)).size).toBe(100);
    expect((await store.get<ReplicaCounter>(keys.counter('big', 'web')))!.value.spec.next).toBe(100);
    const placed = (await store.list<AuditEvent>(keys.audits())).items.filter((x) => x.value.spec.type === 'replica_placed').map((x) => x.value.spec.payload.replica as string);
    expect(placed).toHaveLength(100);
    expect(new Set(placed).size).toBe(100);
    const actors = new Set((await store.list<PlacementDecision>(keys.decisions('big'))).items.map((x) => x.value.spec.actor));
    expect(actors).toEqual(new Set(['scheduler']));
  });
});
