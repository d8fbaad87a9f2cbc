// Health-driven restarts of the replicas that stay (restarts.ts judges one copy; this writes the
// command and its bookkeeping): skipped while a move is in flight, for suspended replicas and on
// NotReady nodes. A replica about to be marked exhausted may be re-placed once instead (relocate.ts).
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ReplicaCommand } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { AuditRecord } from '../../src/store/audit.js';
import { inFlight } from '../moves/move.js';
import type { SchedulerPass } from './pass.js';
import { relocate } from './relocate.js';
import { judgeRestart } from './restarts.js';

export function health(pass: SchedulerPass, e: ReplicaEntry, generation: number): void {
  if (e.copies.length !== 1 || inFlight(e.copies)) return; // a move in flight: the move mechanism watches it
  const c = e.copies[0]!;
  const s = c.desired.spec;
  const cmd = pass.command(e, s.node);
  if (cmd?.value.status?.exhausted && cmd.value.status.generation === generation) pass.condition(e).exhausted.push(e.id);
  if (s.suspended || c.modRevision === 0 || !pass.ready(s.node)) return; // nothing current to judge
  const v = judgeRestart(c.desired, c.observed, cmd?.value, generation, pass.now, pass.cfg.restart);
  if (v.kind === 'none') return pass.wake(v.wakeAt);
  const key = keys.command(s.node, e.id);
  const value: ReplicaCommand = {
    apiVersion: API_VERSION,
    kind: 'ReplicaCommand',
    metadata: { name: e.id },
    spec: cmd?.value.spec ?? { replica: e.id, op: 'restart', seq: 0, issuedAt: pass.iso, reason: 'bookkeeping' },
    status: v.status,
  };
  const audit: AuditRecord[] = [];
  const o = c.observed?.status;
  const observed = o ? `${o.state}${o.code ? ` (${o.code})` : ''}${o.details ? `: ${o.details}` : ''}` : 'not observed';
  if (v.kind === 'restart') {
    value.spec = { replica: e.id, op: 'restart', seq: v.seq, issuedAt: pass.iso, reason: `${v.cause}: ${observed}` };
    pass.plan.restart.push({ replica: e.id, deployment: s.deployment, service: s.service, node: s.node, cause: v.cause, restarts: v.status.restarts, seq: v.seq });
    audit.push({ type: 'replica_restarted', time: pass.now, deployment: s.deployment, payload: { replica: e.id, service: s.service, node: s.node, cause: v.cause, observed, restarts: v.status.restarts, seq: v.seq } });
  } else {
    // Before exhaustion is final: once per generation, another node (crash-loop escalation).
    if (v.kind === 'exhaust' && relocate(pass, e, c, v.cause, v.status, generation)) return;
    pass.plan.commandStatus.push({ replica: e.id, node: s.node, kind: v.kind, status: v.status });
    if (v.kind === 'exhaust') {
      pass.condition(e).exhausted.push(e.id);
      audit.push({ type: 'restart_exhausted', time: pass.now, deployment: s.deployment, payload: { replica: e.id, service: s.service, node: s.node, cause: v.cause, observed, restarts: v.status.restarts } });
    } else {
      const exhausted = pass.condition(e).exhausted;
      const at = exhausted.indexOf(e.id);
      if (at >= 0) exhausted.splice(at, 1);
    }
  }
  pass.plan.acts.push({
    label: `${v.kind} ${s.node}/${e.id}`,
    subject: `deployment/${s.deployment}`,
    ops: [cmd ? { op: 'update', key, value, modRevision: cmd.modRevision } : { op: 'create', key, value }],
    audit,
    ...(v.kind === 'restart' ? { metrics: [{ restarts: { deployment: s.deployment, service: s.service } }] } : {}),
  });
}
