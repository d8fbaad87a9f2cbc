// Asking for a node's drain and cancelling it: drains/<host> created with the node cordoned in one
// transaction (or --force / remove added to a drain in progress), and deleted on cancel. The drain
// controller does the rest. `jaco node drain` and the dashboard call them.
import type { DrainAbortReason } from '../api/reasons/drain.js';
import { keys } from '../api/keys.js';
import { API_VERSION, type NodeDrain, type NodeDrainSpec } from '../api/types.js';
import { AuditLog } from '../store/audit.js';
import type { Store } from '../store/store.js';
import { commitAtomic, type Op } from '../store/writer.js';
import { PRODUCTION } from '../timings.js';
import { CliError } from './errors.js';
import { nodeSpecOps, readNodeToDecide } from './nodes.js';
import { age } from './output.js';
import { readKey, unreadableRefusal } from './read.js';

/** Still being worked on by the controller (removed counts as over: the node is gone). */
const inProgress = (d: NodeDrain) => !d.status || d.status.state === 'pending' || d.status.state === 'draining';

export interface DrainRequest {
  host: string;
  timeout: string;
  force: boolean;
  remove: boolean;
}

export interface DrainRequestResult {
  /** created: a new drain; escalated: --force or remove added to the drain in progress. */
  result: 'created' | 'escalated';
  message: string;
}


/**
 * Creates drains/<host> and cordons the node in one transaction, or adds --force / remove to a
 * drain in progress. Refuses a second drain of a node, and a node that does not exist.
 */
export async function requestDrain(store: Store, req: DrainRequest, now = Date.now()): Promise<DrainRequestResult> {
  const { value: old, unreadable: badDrain } = await readKey<NodeDrain>(store, keys.drain(req.host), 'NodeDrain');
  // What cannot be read cannot be decided on: named (the node's keys first), and how to clear it.
  const node = await readNodeToDecide(store, req.host, `drain node "${req.host}"`, old?.value.status?.state === 'removed' ? ' (it was removed from the cluster)' : '');
  if (badDrain) throw new CliError(`${unreadableRefusal(badDrain, `drain node "${req.host}"`)} (jaco node drain ${req.host} --cancel deletes it)`);
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const what = req.remove ? 'removal' : 'drain';

  if (old && inProgress(old.value)) {
    const s = old.value.spec;
    const escalate = (req.force && !s.force) || (req.remove && !s.remove);
    if (!escalate) {
      const since = old.value.status?.startedAt ?? s.requestedAt;
      throw new CliError(
        `node "${req.host}" is already draining (since ${age(since, now)} ago, ${s.remove ? 'removal' : 'drain'}${s.force ? ' with --force' : ''}); ` +
          `follow it with: jaco node drain-status ${req.host} --wait (or stop it: jaco node drain ${req.host} --cancel)`,
      );
    }
    const spec: NodeDrainSpec = { ...s, force: s.force || req.force, remove: s.remove || req.remove };
    await commitAtomic(store, [{ label: `escalate drain ${req.host}`, ops: [{ op: 'update', key: old.key, value: { ...old.value, spec }, modRevision: old.modRevision }] }]);
    const added = [spec.force && !s.force ? 'with --force (stateful replicas are stopped on the node)' : '', spec.remove && !s.remove ? 'removing the node once drained' : ''].filter(Boolean).join(', ');
    return { result: 'escalated', message: `drain/${req.host} already in progress: now ${added}\n` };
  }

  const drain: NodeDrain = {
    apiVersion: API_VERSION,
    kind: 'NodeDrain',
    metadata: { name: req.host },
    spec: { node: req.host, timeout: req.timeout, force: req.force, remove: req.remove, requestedAt: new Date(now).toISOString() },
  };
  const ops: Op[] = [old ? { op: 'update', key: old.key, value: drain, modRevision: old.modRevision } : { op: 'create', key: keys.drain(req.host), value: drain }];
  const cordoned = !!node.joined.spec?.unschedulable;
  if (cordoned) ops.push({ op: 'check', key: node.node.key, modRevision: node.node.modRevision }, { op: 'check', key: keys.nodeSpec(req.host), modRevision: node.decided?.modRevision ?? 0 });
  else {
    ops.push(...nodeSpecOps(node, { ...node.joined.spec, unschedulable: true }));
    ops.push(await audit.op({ type: 'node_cordoned', time: now, payload: { node: req.host, unschedulable: true, by: what } }));
  }
  await commitAtomic(store, [{ label: `${what} ${req.host}`, ops }]);
  const after = req.remove ? `, then the node object and its heartbeat are deleted` : '';
  return {
    result: 'created',
    message: `drain/${req.host} created: node ${cordoned ? 'was already cordoned' : 'cordoned'}; its replicas move make-before-break (timeout ${req.timeout} per replica)${after}\n`,
  };
}

/** Deletes a drain in progress: the controller withdraws its moves in flight; the node stays cordoned. */
export async function cancelDrain(store: Store, host: string, now = Date.now()): Promise<string> {
  const { value: old, unreadable } = await readKey<NodeDrain>(store, keys.drain(host), 'NodeDrain');
  // A drain whose value cannot be read is cancelled by deleting it: nothing else could tell what it was.
  if (unreadable) {
    await commitAtomic(store, [{ label: `cancel drain ${host}`, ops: [{ op: 'delete', key: unreadable.key, modRevision: unreadable.modRevision }] }]);
    return `drain/${host} (unreadable: ${unreadable.reason}) deleted; the node stays cordoned if it was (jaco node uncordon ${host})\n`;
  }
  if (!old || !inProgress(old.value)) throw new CliError(`no drain in progress on node "${host}"${old?.value.status ? ` (the last one ${old.value.status.state})` : ''}`);
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const reason: DrainAbortReason = 'cancelled';
  await commitAtomic(store, [
    {
      label: `cancel drain ${host}`,
      ops: [{ op: 'delete', key: old.key, modRevision: old.modRevision }, await audit.op({ type: 'drain_aborted', time: now, payload: { node: host, reason } })],
    },
  ]);
  return `drain/${host} cancelled: moves in flight are withdrawn, replicas already moved stay moved; ${await cordonAfter(store, host)}\n`;
}

/** What a cancelled drain leaves of the node's cordon: as it is now (an operator may have uncordoned it during the drain). */
async function cordonAfter(store: Store, host: string): Promise<string> {
  try {
    const node = await readNodeToDecide(store, host, `read node "${host}"`, '');
    return node.joined.spec?.unschedulable ? `the node stays cordoned (jaco node uncordon ${host})` : 'the node is not cordoned (uncordoned during the drain): it takes new replicas';
  } catch {
    return `the node stays cordoned if it was (jaco node uncordon ${host})`;
  }
}
