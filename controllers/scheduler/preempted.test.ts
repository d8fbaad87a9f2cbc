// The scheduler's side of preemption (issue 17): a replica the rebalancer stopped for a
// higher-priority one stays a member of its service (no new index replaces it), the beneficiary
// takes the room in the same pass, the hole is held against the victim while the beneficiary is
// pending, and the victim is placed again — same id, trigger preempted — once capacity exists.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { DeploymentStatus, PlacementDecision, ReplicaDesired, ServiceSpec } from '../../src/api/types.js';
import { iso, World } from '../../test/support/scheduler-world.js';

const svc = (memory: string, x: Partial<ServiceSpec> = {}): ServiceSpec => ({ image: 'jaco-demo/busybox:1', replicas: 1, resources: { memory }, ...x });
const scheduling = (w: World, dep: string, s: string) => w.get<DeploymentStatus>(keys.deploymentStatus(dep))?.status?.scheduling?.services[s];
const copies = (w: World, id: string) => w.list<ReplicaDesired>(keys.desiredOf()).filter((v) => v.value.spec.replica === id).map((v) => v.value.spec);

/** Node a (1 GiB): low-w-0 (500 MiB, priority 0) was just stopped there for hi/api (600 MiB, priority 10), which the last pass reported pending. */
function preempted(hi: Partial<ServiceSpec> = {}): World {
  const w = new World();
  w.node('a', { memory: '1Gi' });
  w.deploy('low', { w: svc('500Mi') });
  const at = iso(w.now - 1_000);
  w.replica('low', 'w', 0, 'a', { suspended: { reason: 'preempted', at }, preempted: { for: { deployment: 'hi', service: 'api', node: 'a' }, priority: 0, forPriority: 10, at } });
  w.put(keys.counter('low', 'w'), { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: 'low-w' }, spec: { deployment: 'low', service: 'w', next: 1 } });
  w.put(keys.deploymentStatus('hi'), {
    apiVersion: 'jaco.dev/v1',
    kind: 'DeploymentStatus',
    metadata: { name: 'hi' },
    status: { scheduling: { observedGeneration: 1, updatedAt: iso(w.now), services: { api: { desired: 1, placed: 0, unschedulable: { reason: 'no_capacity_memory', count: 1, message: 'x', nodes: {} } } } } },
  } satisfies DeploymentStatus);
  w.deploy('hi', { api: svc('600Mi', { priority: 10, ...hi }) });
  return w;
}

describe('preempted replicas (issue 17)', () => {
  it('the beneficiary takes the room; the victim stays a stopped member, reported preempted, not replaced', () => {
    const w = preempted();
    const p = w.pass();
    expect(p.place.map((x) => `${x.replica} ${x.node}`)).toEqual(['hi-api-0 a']);
    expect(copies(w, 'low-w-0')).toMatchObject([{ node: 'a', suspended: { reason: 'preempted' } }]);
    expect(copies(w, 'low-w-1')).toEqual([]);
    const st = scheduling(w, 'low', 'w')!;
    expect(st).toMatchObject({ desired: 1, placed: 0, unschedulable: { reason: 'preempted', count: 1 } });
    expect(st.unschedulable!.message).toContain('hi/api (priority 10 over 0)');
  });

  it('the hole is held against the victim while its beneficiary is pending', () => {
    // hi/api cannot use a (its selector), yet its status says pending: a stays held for it.
    const w = preempted({ placement: { nodeSelector: { gpu: 'yes' } } });
    w.pass();
    expect(copies(w, 'low-w-0')).toMatchObject([{ suspended: { reason: 'preempted' } }]);
    expect(scheduling(w, 'low', 'w')!.unschedulable!.nodes.a).toContain('held for hi/api');
  });

  it('placed again, same id, once capacity exists (a node joins): trigger preempted, audited and explained', () => {
    const w = preempted();
    w.pass();
    w.node('b', { memory: '1Gi' });
    const p = w.pass();
    expect(p.place.map((x) => `${x.replica} ${x.node} ${x.trigger}`)).toEqual(['low-w-0 b preempted']);
    const [c] = copies(w, 'low-w-0');
    expect(c).toMatchObject({ node: 'b', index: 0 });
    expect(c!.suspended).toBeUndefined();
    expect(c!.preempted).toBeUndefined();
    expect(w.get<PlacementDecision>(keys.decision('low', 'low-w-0'))!.spec).toMatchObject({ chosen: 'b', trigger: 'preempted' });
    expect(w.auditOf('replica_placed').at(-1)!.payload).toMatchObject({ replica: 'low-w-0', node: 'b', from: 'a', trigger: 'preempted' });
    expect(scheduling(w, 'low', 'w')).toEqual({ desired: 1, placed: 1 });
  });

  it('a replica pending for capacity beside a preempted one heads the status, so the rescheduler still sees it', () => {
    const w = preempted();
    w.pass();
    // Scale low/w to 2: the new replica does not fit either.
    w.deploy('low', { w: svc('500Mi', { replicas: 2 }) });
    w.pass();
    const u = scheduling(w, 'low', 'w')!.unschedulable!;
    expect(u).toMatchObject({ reason: 'no_capacity_memory', count: 2 });
    expect(u.message).toContain('low-w-0 was stopped on a for hi/api');
  });
});
