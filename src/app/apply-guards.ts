// What keeps an apply's checks true for what lands, without refusing unrelated applies. apply.ts
// checks the deployments it writes against every other one (replicaIdConflicts,
// publishedPortConflicts, api/rules.ts) on one read at revision R; a concurrent apply can only
// break those checks by writing a deployment whose replica ids or ports meet the new ones. So the
// transaction compares exactly what could: each deployment's own key, the keys of deployments
// whose names could make the same replica ids, and one guard key per port a deployment starts to
// publish or bind — never the whole deployments/ prefix (which failed ~30 % of 10 concurrent
// applies of unrelated deployments, issue 29).
import { keys } from '../api/keys.js';
import { fixedHostPorts, publishedPorts } from '../api/ports.js';
import type { DeploymentSpec } from '../api/types.js';
import type { Op } from '../store/writer.js';

/** One deployment an apply writes: its new spec, and the stored one (undefined: new, or unreadable). */
export interface GuardedItem {
  name: string;
  spec: DeploymentSpec;
  stored?: DeploymentSpec;
}

/**
 * The names whose deployments could name replicas like `name`'s: a replica id is
 * `<deployment>-<service>-<n>`, so "x" with service "a-b" and "x-a" with service "b" meet. Those
 * are the deployments named by a `-`-bounded prefix of `name` (each an exact key), and those under
 * `name-` (a range).
 */
export function idNeighbours(name: string): { prefixes: string[]; under: string } {
  const prefixes: string[] = [];
  for (let i = name.indexOf('-'); i > 0; i = name.indexOf('-', i + 1)) prefixes.push(name.slice(0, i));
  return { prefixes, under: `${name}-` };
}

/** Ports a spec publishes (at the ingress) or binds on its node as fixed host ports: what publishedPortConflicts compares. */
export function portsTaken(name: string, spec: DeploymentSpec | undefined): Set<number> {
  if (!spec) return new Set();
  const out = new Set(publishedPorts([{ name, spec }]).map((p) => p.published));
  for (const svc of Object.values(spec.services)) for (const p of fixedHostPorts(svc)) out.add(p);
  return out;
}

/**
 * The preconditions of an apply's conflict checks, read at `readAt`: for a deployment that adds
 * services (new replica ids), every neighbour key unchanged since; for every port it starts to
 * take, its guard key written (compared at its mod revision as read, 0: absent), so two applies
 * that both start to take one port cannot both land. Removing services or ports needs nothing: it
 * cannot make a conflict. `modRevisionOf` gives a deployment key's mod revision as read (0: absent),
 * readable or not; `guardRevisionOf` a port guard's.
 */
export function applyGuards(items: readonly GuardedItem[], readAt: number, modRevisionOf: (name: string) => number, guardRevisionOf: (port: number) => number, now: string): Op[] {
  const ops: Op[] = [];
  const writing = new Set(items.map((i) => i.name));
  const checked = new Set<string>();
  const ports = new Map<number, string>();
  for (const i of items) {
    const had = new Set(Object.keys(i.stored?.services ?? {}));
    if (Object.keys(i.spec.services).some((s) => !had.has(s))) {
      const { prefixes, under } = idNeighbours(i.name);
      ops.push({ op: 'checkRange', key: keys.deployment(under), unchangedSince: readAt });
      for (const p of prefixes) {
        // A neighbour this apply writes is compared by its own write already.
        if (writing.has(p) || checked.has(p)) continue;
        checked.add(p);
        ops.push({ op: 'check', key: keys.deployment(p), modRevision: modRevisionOf(p) });
      }
    }
    const before = portsTaken(i.name, i.stored);
    for (const port of portsTaken(i.name, i.spec)) if (!before.has(port) && !ports.has(port)) ports.set(port, i.name);
  }
  for (const [port, deployment] of [...ports].sort(([a], [b]) => a - b)) {
    const key = keys.portGuard(port);
    const value = { port, deployment, at: now };
    const rev = guardRevisionOf(port);
    ops.push(rev ? { op: 'update', key, value, modRevision: rev } : { op: 'create', key, value });
  }
  return ops;
}
