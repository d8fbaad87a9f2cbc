// jaco explain REPLICA | DEPLOYMENT/SERVICE: why the scheduler placed a replica where it did (or
// could not place a service's replicas). It prints the decision as it was stored when it was
// made — every node's verdict, the winner's score and why it won — never a recomputation.
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import type { Deployment, DeploymentStatus, PlacementDecision, ReplicaDesired } from '../../api/types.js';
import type { Store } from '../../store/store.js';
import { readCut, readPrefix, unreadableIn, unreadableRefusal, warnUnreadable } from '../../app/read.js';
import { action, CliError, deploymentArg, parseOutput, timingsOf, withStore } from '../common.js';
import { age, indent, printObjects, table } from '../../app/output.js';
import { coalesceText, currentPlan, type CoalesceView } from '../../app/rebalance-plan.js';
import { decisionsOf, findDecision, renderDecision } from '../../app/decisions.js';

async function explainReplica(store: Store, replica: string, format: string, now: number): Promise<string | undefined> {
  const cut = await readCut(store, ['deployments', 'desired']);
  warnUnreadable(unreadableIn(cut));
  const dec = await findDecision(store, cut, replica);
  const copies = [...cut.kind<ReplicaDesired>('desired').items.values()].map((d) => d.value).filter((d) => d.spec.replica === replica);
  if (!dec) {
    if (copies.length) throw new CliError(`replica "${replica}" exists on ${copies.map((c) => c.spec.node).join(', ')} but has no stored placement decision (placed before decisions were recorded, or by another tool)`);
    throw new CliError(`replica "${replica}" not found (no placement decision stored for it); see jaco get replicas`);
  }
  if (format !== 'table') return void printObjects(format, [dec], true);
  return renderDecision(dec, now, copies);
}

async function explainService(store: Store, dep: string, svc: string, format: string, now: number, rescheduler: () => Promise<readonly CoalesceView[]>): Promise<string | undefined> {
  const cut = await readCut(store, ['deployments', 'statuses', 'desired']);
  const stored = await readPrefix<PlacementDecision>(store, decisionsOf(dep), cut.revision);
  warnUnreadable([...unreadableIn(cut), ...stored.unreadable]);
  const d = cut.kind<Deployment>('deployments').items.get(keys.deployment(dep));
  if (!d) {
    const u = cut.unreadableAt(keys.deployment(dep));
    throw new CliError(u ? unreadableRefusal(u, `explain ${dep}/${svc}`) : `deployment "${dep}" not found`);
  }
  const spec = d.value.spec.services[svc];
  if (!spec) throw new CliError(`deployment "${dep}" has no service "${svc}"; it has ${Object.keys(d.value.spec.services).join(', ')}`);
  const st = cut.kind<DeploymentStatus>('statuses').items.get(keys.deploymentStatus(dep))?.value.status?.scheduling;
  const sch = st?.services[svc];
  const decisions = stored.items.map((x) => x.value).filter((x) => x.spec.service === svc);
  const copies = [...cut.kind<ReplicaDesired>('desired').items.values()].map((x) => x.value).filter((x) => x.spec.deployment === dep && x.spec.service === svc);
  if (format !== 'table') return void printObjects(format, [{ deployment: dep, service: svc, scheduling: sch ?? null, decisions }], true);

  let out = `Service:     ${dep}/${svc} (placement ${spec.placement?.mode ?? 'spread'})\n`;
  out += sch ? `Scheduling:  ${sch.placed} placed of ${sch.desired} desired (as of generation ${st!.observedGeneration}, ${st!.updatedAt})\n` : 'Scheduling:  no status yet (is the scheduler running? jaco controller scheduler)\n';
  const u = sch?.unschedulable;
  if (u) {
    out += `\nUnschedulable: ${u.count} replica(s), reason ${u.reason}\n  ${u.message}\n`;
    if (u.missing?.length) out += `  missing hosts: ${u.missing.join(', ')}\n`;
    out += indent(table(['NODE', 'REJECTED BY'], Object.entries(u.nodes).map(([n, why]) => [n, why])), 2);
    // What the rescheduler does to make room (coalescing), from its leader or recomputed.
    const v = (await rescheduler()).find((c) => c.deployment === dep && c.service === svc);
    if (v) out += `Rescheduler: ${coalesceText(v)}\n`;
  }
  if (sch?.restartExhausted?.length) out += `\nRestart exhausted: ${sch.restartExhausted.join(', ')} (no more restarts until the next apply)\n`;
  if (sch?.nodeLost?.length) out += `\nNode lost: ${sch.nodeLost.join(', ')} (stateful: kept on their node)\n`;
  const where = new Map<string, string[]>();
  for (const c of copies) where.set(c.spec.replica, [...(where.get(c.spec.replica) ?? []), c.spec.node]);
  const ids = [...new Set([...decisions.map((x) => x.spec.replica), ...where.keys()])].sort();
  if (ids.length) {
    out += '\nReplicas (the decision stored when each was placed; jaco explain REPLICA for every node):\n';
    const byId = new Map(decisions.map((x) => [x.spec.replica, x.spec]));
    const rows = ids.map((id) => {
      const x = byId.get(id);
      return [id, where.get(id)?.join(',') ?? '(gone)', x ? `${age(x.at, now)} ago` : '-', x?.trigger ?? '-', x?.why ?? 'no stored decision'];
    });
    out += indent(table(['REPLICA', 'NOW ON', 'DECIDED', 'TRIGGER', 'WHY'], rows), 2);
  }
  return out;
}

export function registerExplain(program: Command): void {
  program
    .command('explain')
    .description('Explain a placement as it was decided: per node the filter that rejected it or its score, and why the chosen node won')
    .argument('<target>', 'a replica id (hello-web-0), or DEPLOYMENT/SERVICE for a service and its unschedulable replicas', deploymentArg)
    .option('-o, --output <format>', 'yaml or json (the stored decision objects)')
    .addHelpText(
      'after',
      `
Filters, in pipeline order: eligibility (NotReady, cordoned, draining, no capacity), excluded,
hosts, node_selector, volume_locality, volume_in_use, memory, gpus, ports, ipam (a free address of the
node's subnets for a cluster-network replica), max_per_node, anti_affinity. Scores: spread and
hosts prefer the node with the fewest replicas of the service (peers), then CPU headroom against
capacity × 4 in quarter steps (cpu), then a stable per-replica hash (hash); pack prefers the node
with the fewest replicas. Decisions are stored when made (decisions/<deployment>/<replica>).

Examples:
  jaco explain hello-web-0
  jaco explain hello/web
  jaco explain hello-web-0 -o yaml
`,
    )
    .action(
      action(async (target: string, opts: { output?: string }, cmd: Command) => {
        const format = parseOutput(opts.output, ['table', 'yaml', 'json']);
        const text = await withStore(cmd, (store) => {
          const slash = target.indexOf('/');
          if (slash < 0) return explainReplica(store, target, format, Date.now());
          const [dep, svc] = [target.slice(0, slash), target.slice(slash + 1)];
          if (!dep || !svc || svc.includes('/')) throw new CliError(`"${target}" is neither a replica id nor DEPLOYMENT/SERVICE`);
          return explainService(store, dep, svc, format, Date.now(), async () => (await currentPlan(store, timingsOf(cmd), { timeoutMs: 1500 })).plan.coalesce);
        });
        if (text) process.stdout.write(text);
      }),
    );
}
