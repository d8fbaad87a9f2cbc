// jaco get / describe: read the cluster, kubectl-style.
import { unschedulableReasonOf } from '../../api/reasons/scheduling.js';
import type { Command } from 'commander';
import { drainSummary } from '../../app/controllers.js';
import { keys } from '../../api/keys.js';
import { skewDescription, skewText, skewWarns } from '../../api/clock-skew.js';
import { labelsText, nodeReady, nodeStatusText } from '../../api/nodes.js';
import { conditionLines, statusWithCondition } from '../../api/eligibility.js';
import { imageDigest, placementMode, runImage, shortDigest } from '../../api/spec.js';
import { bareAddress } from '../../api/network.js';
import { serviceFiles } from '../../api/files.js';
import { normalizePorts } from '../../api/ports.js';
import type { AuditEvent, Deployment, DeploymentStatus, Endpoints, IngressStatus, NodeSubnet, PlacementDecision } from '../../api/types.js';
import { formatBytes } from '../../api/units.js';
import { readAudit } from '../../store/audit.js';
import type { Store } from '../../store/store.js';
import type { Cache } from '../../runtime/cache.js';
import type { Unreadable } from '../../store/reflector.js';
import { CLUSTER_VIEW_READS, clusterViewOf, desiredCount, jobText, nodeConditionsOf, readClusterView, replicaState, runningCount, type ClusterView, type ReplicaRow } from '../../app/cluster-view.js';
import { readCut, readKey, unreadableIn, unreadableRefusal, warnUnreadable } from '../../app/read.js';
import { action, CliError, parseOutput, typeSlashName, withStore } from '../common.js';
import { endpointRows, ENDPOINT_HEADERS, selectEndpoints, serviceRoutingTable } from '../endpoints-view.js';
import { age, indent, printObjects, printTable, table, toYaml } from '../../app/output.js';
import { describeFileObject, printFileObjects } from './secret.js';

type Kind = 'deployments' | 'nodes' | 'replicas' | 'endpoints' | 'services' | 'secrets' | 'configs';
const ALIASES: Record<string, Kind> = {
  deployment: 'deployments',
  deployments: 'deployments',
  deploy: 'deployments',
  node: 'nodes',
  nodes: 'nodes',
  no: 'nodes',
  replica: 'replicas',
  replicas: 'replicas',
  endpoints: 'endpoints',
  ep: 'endpoints',
  service: 'services',
  services: 'services',
  svc: 'services',
  secret: 'secrets',
  secrets: 'secrets',
  config: 'configs',
  configs: 'configs',
};

function kindOf(t: string): Kind {
  const k = ALIASES[t];
  if (!k) throw new CliError(`unknown resource type ${JSON.stringify(t)}; use deployments, nodes, replicas, endpoints, services, secrets or configs`);
  return k;
}

const readyNodeCount = (v: ClusterView, now: number) => [...v.nodes.keys()].filter((n) => nodeReady(v.heartbeats.get(n))).length;

function replicaObject(r: ReplicaRow): Record<string, unknown> {
  const { template: _t, ...spec } = r.desired.spec;
  return { apiVersion: 'jaco.dev/v1', kind: 'Replica', metadata: { name: r.id }, spec, status: r.observed?.status ?? replicaState(r) };
}

/** Keys of a prefix the view could not read, by name (the rest of the key), when `name` is one of them or none is asked for. */
function unreadableNamed(v: ClusterView, prefix: string, name: string | undefined): Unreadable[] {
  return v.unreadable.filter((u) => u.key.startsWith(prefix) && (!name || u.key === prefix + name));
}

/** "not found", unless the key is there but cannot be read: then that, with why. */
function notFound(v: ClusterView, what: string, prefix: string, name: string): CliError {
  const u = unreadableNamed(v, prefix, name)[0];
  return new CliError(u ? unreadableRefusal(u, `show ${what} "${name}"`) : `${what} "${name}" not found`);
}

/** Table rows of keys that cannot be read: the name, then the status column says so. */
const unreadableRows = (list: Unreadable[], prefix: string, width: number) => list.map((u) => [u.key.slice(prefix.length), 'Unreadable', ...Array<string>(width - 2).fill('-')]);

function getDeployments(v: ClusterView, name: string | undefined, out: string, now: number): void {
  const deps = [...v.deployments.values()].filter((d) => !name || d.value.metadata.name === name);
  if (name && !deps.length) throw notFound(v, 'deployment', keys.deployments(), name);
  if (out !== 'table' && out !== 'wide') return printObjects(out, deps.map((d) => d.value), !!name, v.revision);
  const ready = readyNodeCount(v, now);
  const rows = deps.map(({ value: d }) => {
    const mine = v.replicas.filter((r) => r.desired.spec.deployment === d.metadata.name);
    const want = Object.keys(d.spec.services).reduce((s, svc) => s + desiredCount(d, svc, ready), 0);
    const row: (string | number)[] = [d.metadata.name, Object.keys(d.spec.services).length, `${runningCount(mine)}/${want}`, d.metadata.generation ?? 1, age(d.metadata.creationTimestamp, now)];
    if (out === 'wide') row.push(Object.entries(d.spec.services).map(([n, s]) => `${n}=${s.image}`).join(','));
    return row;
  });
  const headers = ['NAME', 'SERVICES', 'RUNNING', 'REVISION', 'AGE', ...(out === 'wide' ? ['IMAGES'] : [])];
  printTable(headers, [...rows, ...unreadableRows(unreadableNamed(v, keys.deployments(), name), keys.deployments(), headers.length)]);
}

function getNodes(v: ClusterView, name: string | undefined, out: string, now: number): void {
  const nodes = [...v.nodes.values()].filter((n) => !name || n.value.metadata.name === name);
  if (name && !nodes.length) throw notFound(v, 'node', keys.nodes(), name);
  if (out !== 'table' && out !== 'wide') return printObjects(out, nodes.map((n) => n.value), !!name, v.revision);
  const conditions = nodeConditionsOf(v, now);
  const rows = nodes.map(({ value: n }) => {
    const host = n.metadata.name;
    const hb = v.heartbeats.get(host);
    const c = n.status?.capacity;
    const count = new Set(v.replicas.filter((r) => r.node === host).map((r) => r.id)).size;
    const status = statusWithCondition(nodeStatusText(n, hb, v.drains.get(host)), conditions.get(host));
    const row: (string | number)[] = [host, status, c ? `${c.cpuMillis / 1000}` : '?', c ? formatBytes(c.memoryBytes) : '?', c?.diskBytes !== undefined ? formatBytes(c.diskBytes) : '-', c?.gpus ?? 0, count, age(n.status?.registeredAt, now), n.status?.agentVersion ?? ''];
    if (out === 'wide') {
      const p = hb?.spec.pressure;
      // SKEW: the agent's clock against the controllers' (api/clock-skew.ts), marked past the warning threshold.
      const skew = hb?.spec.clockSkewMs;
      row.push(n.status?.address ?? '-', p ? `${(p.cpuUtil * 100).toFixed(0)}%` : '-', p ? `${(p.memoryUtil * 100).toFixed(0)}%` : '-', p ? (p.mode ?? 'containers') : '-', `${skewText(skew)}${skewWarns(skew) ? '!' : ''}`, labelsText(n, ',') || '-');
    }
    return row;
  });
  const headers = ['NAME', 'STATUS', 'CPU', 'MEMORY', 'DISK', 'GPUS', 'REPLICAS', 'AGE', 'VERSION', ...(out === 'wide' ? ['ADDRESS', 'CPU%', 'MEM%', 'PRESSURE', 'SKEW', 'LABELS'] : [])];
  // A node whose nodespecs/<host> cannot be read is listed (read as cordoned), that key beneath it by its full name.
  const unreadable = [...unreadableRows(unreadableNamed(v, keys.nodes(), name), keys.nodes(), headers.length), ...unreadableRows(unreadableNamed(v, keys.nodeSpecs(), name), '', headers.length)];
  printTable(headers, [...rows, ...unreadable]);
}

function getReplicas(v: ClusterView, name: string | undefined, out: string, now: number, deployment?: string): void {
  const rows = v.replicas.filter((r) => (!name || r.id === name) && (!deployment || r.desired.spec.deployment === deployment));
  if (name && !rows.length) throw new CliError(`replica "${name}" not found`);
  if (out !== 'table' && out !== 'wide') return printObjects(out, rows.map(replicaObject), !!name && rows.length === 1, v.revision);
  printTable(
      ['NAME', 'DEPLOYMENT', 'SERVICE', 'NODE', 'REVISION', 'STATE', 'CODE', 'RESTARTS', 'AGE', ...(out === 'wide' ? ['ADDRESS', 'IMAGE', 'DIGEST', 'CONTAINER', 'MOVE'] : [])],
      rows.map((r) => {
        const s = replicaState(r);
        const row: (string | number | undefined)[] = [r.id, r.desired.spec.deployment, r.desired.spec.service, r.node, r.desired.spec.revision, s.state, s.code ?? '', r.command?.status?.restarts ?? 0, age(r.observed?.status?.startedAt ?? r.desired.spec.placedAt, now)];
        // The digest the container runs (observed), else the one it is to run (desired).
        const pinned = r.observed?.status?.image ?? runImage(r.desired.spec.template);
        const a = r.desired.spec.address;
        if (out === 'wide') row.push(a ? `${bareAddress(a.ipv4)},${bareAddress(a.ipv6)}` : '-', r.desired.spec.template.image, pinned.includes('@') ? shortDigest(pinned) : '-', r.observed?.status?.containerId?.slice(0, 12) ?? '', r.desired.spec.move ? `from ${r.desired.spec.move.from} (${r.desired.spec.move.by})` : '');
        return row;
      }),
  );
}

/** The latest audit records that match, read at the view's revision (the moment the rest shows). */
async function recentEvents(store: Store, v: ClusterView, match: (e: AuditEvent) => boolean, n = 10): Promise<string> {
  const { events, unreadable } = await readAudit(store, {}, v.revision);
  warnUnreadable(unreadable);
  const mine = events.filter((e) => match(e.value)).slice(-n);
  if (!mine.length) return 'Events: <none>\n';
  return 'Events:\n' + indent(table(['TIME', 'TYPE', 'ACTOR', 'DETAILS'], mine.map((e) => [e.value.spec.time, e.value.spec.type, e.value.spec.actor, JSON.stringify(e.value.spec.payload)])), 2);
}


/** A service's summary lines (describe deployment, describe service). */
function serviceLines(v: ClusterView, d: Deployment, svc: string, st: DeploymentStatus['status'] | undefined, readyNodes: number): string {
  const s = d.spec.services[svc]!;
  const name = d.metadata.name;
  const rows = v.replicas.filter((r) => r.desired.spec.deployment === name && r.desired.spec.service === svc);
  let out = `Image:      ${s.image}${s.pinnedImage ? `\nDigest:     ${imageDigest(s.pinnedImage)} (${s.pinnedImage.slice(0, s.pinnedImage.indexOf('@'))}, pinned at apply)` : s.pullPolicy === 'never' ? '\nDigest:     - (pullPolicy never: each node runs its own copy)' : ''}\nPlacement:  ${placementMode(s)}\nReplicas:   ${runningCount(rows)} running / ${desiredCount(d, svc, readyNodes)} desired\n`;
  const ports = normalizePorts(s).map((p) => `${p.name} ${p.containerPort}/${p.protocol} → host ${p.hostPort ?? 'dynamic'}${p.published !== undefined ? `, published ${p.published}` : ''}`);
  if (ports.length) out += `Ports:      ${ports.join('; ')}\n`;
  // Which secrets and configs, and where: never a value (there is none in a spec).
  const files = serviceFiles(s);
  for (const kind of ['secret', 'config'] as const) {
    const mine = files.filter((f) => f.kind === kind);
    if (mine.length) out += `${kind === 'secret' ? 'Secrets:' : 'Configs:'}    ${mine.map((f) => `${f.ref.source} → ${f.target} (${f.uid}:${f.gid} ${f.mode.toString(8).padStart(4, '0')})`).join('; ')}\n`;
  }
  const sch = st?.scheduling?.services[svc];
  if (sch?.unschedulable) out += `Unschedulable: ${sch.unschedulable.count} (${unschedulableReasonOf(sch.unschedulable.reason)}): ${sch.unschedulable.message}\n`;
  if (sch?.waitingForDependency?.length) out += `Waiting for: ${sch.waitingForDependency.join(', ')} (dependsOn)\n`;
  if (sch?.job) out += `Job:        ${jobText(sch.job)}${sch.job.exitCode !== undefined ? `, exit code ${sch.job.exitCode}` : ''}\n`;
  const ro = st?.rollout?.services[svc];
  if (ro) out += `Rollout:    ${ro.state} revision ${ro.fromRevision} → ${ro.toRevision}, step ${ro.currentStep}/${ro.totalSteps}${ro.failureReason ? ` (${ro.failureReason})` : ''}\n`;
  return out;
}

/** `jaco describe service DEPLOYMENT/SERVICE`: the service, and how every node's ingress routes each copy. */
async function describeService(store: Store, cut: Cache, v: ClusterView, name: string, now: number): Promise<string> {
  const [dep, svc] = name.split('/');
  const d = v.deployments.get(dep ?? '')?.value;
  if (!d && dep) {
    const u = unreadableNamed(v, keys.deployments(), dep)[0];
    if (u) throw new CliError(unreadableRefusal(u, `show service "${name}"`));
  }
  if (!d || !svc || !d.spec.services[svc]) throw new CliError(`service "${name}" not found (name it DEPLOYMENT/SERVICE)`);
  const endpoints = cut.kind<Endpoints>('endpoints').items.get(keys.endpoints(dep!, svc));
  let out = `Name:         ${name}\n` + serviceLines(v, d, svc, v.statuses.get(dep!)?.status, readyNodeCount(v, now));
  const mine = [...cut.kind<IngressStatus>('ingresses').items.values()].map((i) => i.value);
  const published = normalizePorts(d.spec.services[svc]!).filter((p) => p.published !== undefined);
  const copies = v.replicas.filter((r) => r.desired.spec.deployment === dep && r.desired.spec.service === svc).map((r) => ({ replica: r.id, node: r.node, state: replicaState(r).state }));
  const t = serviceRoutingTable(copies, endpoints?.value, published.length ? mine : []);
  out += published.length ? `Routing (each node's ingress, from ingresses/<node>):\n` : 'Routing:      not published (no ingress answers it); endpoints only\n';
  out += indent(table(t.headers, t.rows), 2);
  if (published.length) {
    const silent = [...v.nodes.keys()].filter((n) => !mine.some((i) => i.spec.node === n)).sort();
    if (silent.length) out += `  No ingress status from: ${silent.join(', ')} (is \`jaco ingress\` running there?)\n`;
    for (const i of mine) for (const c of i.spec.conflicts ?? []) if (c.ignored.includes(name) || c.routedTo === name) out += `  Conflict on ${i.spec.node}: port ${c.published} routed to ${c.routedTo}, ignored for ${c.ignored.join(', ')}\n`;
  }
  // Any route of the service an ingress could not bind (published or its service address).
  for (const i of mine) for (const u of i.spec.unbound ?? []) if (`${u.deployment}/${u.service}` === name) out += `  Not answered on ${i.spec.node}: ${u.address} cannot be bound (${u.reason}); tried again with back-off\n`;
  out += await recentEvents(store, v, (e) => e.spec.deployment === dep && (e.spec.payload.service === svc || String(e.spec.payload.replica ?? '').startsWith(`${dep}-${svc}-`)));
  return out;
}

async function describe(store: Store, kind: Kind, name: string, now: number): Promise<string> {
  const cut = await readCut(store, [...CLUSTER_VIEW_READS, 'endpoints', 'ingresses', 'subnets']);
  const v = clusterViewOf(cut);
  warnUnreadable(unreadableIn(cut));
  let out = '';
  if (kind === 'services') return describeService(store, cut, v, name, now);
  if (kind === 'deployments') {
    const d = v.deployments.get(name)?.value;
    if (!d) throw notFound(v, 'deployment', keys.deployments(), name);
    const st = v.statuses.get(name)?.status;
    out += `Name:         ${name}\nRevision:     ${d.metadata.generation}\nCreated:      ${d.metadata.creationTimestamp}\nServices:\n`;
    const ready = readyNodeCount(v, now);
    for (const svc of Object.keys(d.spec.services)) out += `  ${svc}:\n` + indent(serviceLines(v, d, svc, st, ready), 4);
    out += 'Replicas:\n';
    out += indent(table(
      ['NAME', 'NODE', 'REVISION', 'STATE', 'CODE'],
      v.replicas.filter((r) => r.desired.spec.deployment === name).map((r) => [r.id, r.node, r.desired.spec.revision, replicaState(r).state, replicaState(r).code ?? '']),
    ), 2);
    out += await recentEvents(store, v, (e) => e.spec.deployment === name);
  } else if (kind === 'nodes') {
    const n = v.nodes.get(name)?.value;
    if (!n) throw notFound(v, 'node', keys.nodes(), name);
    const hb = v.heartbeats.get(name);
    const condition = nodeConditionsOf(v, now).get(name);
    out += `Name:         ${name}\nStatus:       ${statusWithCondition(nodeStatusText(n, hb, v.drains.get(name)), condition)}\nLabels:       ${labelsText(n) || '<none>'}\n`;
    out += `Address:      ${n.status?.address ?? '<none>'}\n`;
    // Its subnets of the cluster network (IPAM), once a cluster-network service exists.
    const sub = cut.kind<NodeSubnet>('subnets').items.get(keys.subnet(name))?.value.spec;
    if (sub) out += `Subnets:      ${sub.ipv4}, ${sub.ipv6} (index ${sub.index}; ${await store.countPrefix(keys.addresses(name))} address(es) held)\n`;
    const disk = n.status?.capacity.diskBytes;
    out += `Capacity:     cpu ${(n.status?.capacity.cpuMillis ?? 0) / 1000}, memory ${formatBytes(n.status?.capacity.memoryBytes ?? 0)}, disk ${disk !== undefined ? formatBytes(disk) : '- (not reported)'}, gpus ${n.status?.capacity.gpus ?? 0}\n`;
    // What placement matches runtime_missing and device_missing against.
    const c = n.status?.capacity;
    out += `Runtimes:     ${c?.runtimes ? c.runtimes.join(', ') || '<none>' : '<unknown>'}\nDevices:      ${[...(c?.devices ?? []), ...(c?.gpuIds ?? []).map((g) => `gpu ${g}`)].join(', ') || '<none>'}\n`;
    out += `Agent:        ${n.status?.agentVersion ?? '?'}, registered ${n.status?.registeredAt ?? '?'}\n`;
    out += `Secrets key:  ${n.status?.secretsKey?.id ?? '<none> (an agent older than secrets: no secret can be copied to it)'}\n`;
    out += `Heartbeat:    ${hb ? `${hb.spec.time} (every ${hb.spec.intervalMs} ms), docker ${hb.spec.dockerUp ? 'up' : 'DOWN'}` : '<none> (its agent holds no lease)'}\n`;
    out += `Clock skew:   ${skewDescription(hb)}\n`;
    const p = hb?.spec.pressure;
    // The mode: the whole host (a real agent) or the sum of its own containers (a simulated node).
    if (p) out += `Pressure:     cpu ${(p.cpuUtil * 100).toFixed(1)}%, memory ${(p.memoryUtil * 100).toFixed(1)}% at ${p.time} (${(p.mode ?? 'containers') === 'node' ? 'node-wide' : 'sum of its containers'})\n`;
    out += conditionLines(n, hb, condition, v.settings).join('\n') + '\n';
    const drain = v.drains.get(name);
    if (drain) {
      const [head, ...waiting] = drainSummary(drain);
      out += `Drain:        ${head}\n` + waiting.map((l) => `  ${l}\n`).join('');
    }
    out += 'Replicas:\n' + indent(table(['NAME', 'DEPLOYMENT', 'SERVICE', 'STATE'], v.replicas.filter((r) => r.node === name).map((r) => [r.id, r.desired.spec.deployment, r.desired.spec.service, replicaState(r).state])), 2);
    out += await recentEvents(store, v, (e) => JSON.stringify(e.spec.payload).includes(`"${name}"`));
  } else {
    const rows = v.replicas.filter((r) => r.id === name);
    if (!rows.length) throw new CliError(`replica "${name}" not found`);
    for (const r of rows) out += toYaml(replicaObject(r));
    const decision = await readKey<PlacementDecision>(store, keys.decision(rows[0]!.desired.spec.deployment, name), 'PlacementDecision', v.revision);
    if (decision.value) out += `Placement: ${decision.value.value.spec.why}\n`;
    if (decision.unreadable) warnUnreadable([decision.unreadable]);
    out += await recentEvents(store, v, (e) => e.spec.payload.replica === name || e.spec.payload.replica_id === name);
  }
  return out;
}

export function registerGet(program: Command): void {
  program
    .command('get')
    .description('List deployments, nodes, replicas, endpoints (address:port of each routable replica), secrets or configs (never their values)')
    .argument('<type>', 'deployments (deploy), nodes (no), replicas, endpoints (ep; name: DEPLOYMENT or DEPLOYMENT/SERVICE), secrets or configs (or TYPE/NAME in one, as kubectl takes it)')
    .argument('[name]', 'one object by name')
    .option('-o, --output <format>', 'yaml, json or wide')
    .option('-d, --deployment <name>', 'replicas: only this deployment')
    .addHelpText('after', '\nExamples:\n  jaco get nodes\n  jaco get replicas -d hello -o wide\n  jaco get deployment hello -o yaml\n')
    .action(
      action(async (typeArg: string, nameArg: string | undefined, opts: { output?: string; deployment?: string }, cmd: Command) => {
        const { type, name } = typeSlashName(typeArg, nameArg);
        const kind = kindOf(type);
        const out = parseOutput(opts.output, ['table', 'wide', 'yaml', 'json']);
        // Never a value: the same view as jaco secret|config ls.
        if (kind === 'secrets' || kind === 'configs') return printFileObjects(cmd, kind === 'secrets' ? 'secret' : 'config', name, out);
        await withStore(cmd, async (store) => {
          if (kind === 'services') throw new CliError('get: services are listed by `jaco get deployments -o wide`; see one with `jaco describe service DEPLOYMENT/SERVICE`');
          if (kind === 'endpoints') {
            const cut = await readCut(store, ['endpoints', 'ingresses']);
            const items = selectEndpoints([...cut.kind<Endpoints>('endpoints').items.values()].map((i) => i.value), name);
            if (out === 'table' || out === 'wide') printTable(ENDPOINT_HEADERS, endpointRows(items, [...cut.kind<IngressStatus>('ingresses').items.values()].map((i) => i.value)));
            else printObjects(out, items, false);
            warnUnreadable(unreadableIn(cut));
            return;
          }
          const v = await readClusterView(store);
          warnUnreadable(v.unreadable);
          const now = Date.now();
          if (kind === 'deployments') getDeployments(v, name, out, now);
          else if (kind === 'nodes') getNodes(v, name, out, now);
          else getReplicas(v, name, out, now, opts.deployment);
        });
      }),
    );

  program
    .command('describe')
    .description('Show one deployment, service, node, replica, secret or config in detail (a secret never with its value)')
    .argument('<type>', 'deployment, service (svc), node, replica, secret or config (or TYPE/NAME in one, as kubectl takes it)')
    .argument('[name]', 'its name (a service: DEPLOYMENT/SERVICE)')
    .addHelpText('after', "\nExamples:\n  jaco describe deployment hello\n  jaco describe service hello/site   # with each node's ingress routing of every replica\n  jaco describe node node-1\n")
    .action(
      action(async (typeArg: string, nameArg: string | undefined, _opts: unknown, cmd: Command) => {
        const { type, name } = typeSlashName(typeArg, nameArg);
        if (name === undefined) throw new CliError(`describe: name the ${type}: jaco describe ${type} NAME (or ${type}/NAME)`);
        const kind = kindOf(type);
        if (kind === 'endpoints') throw new CliError('describe: endpoints have no detail view; use `jaco get endpoints [DEPLOYMENT[/SERVICE]] -o yaml`');
        if (kind === 'secrets' || kind === 'configs') return void process.stdout.write(await describeFileObject(cmd, kind === 'secrets' ? 'secret' : 'config', name));
        const text = await withStore(cmd, (store) => describe(store, kind, name, Date.now()));
        process.stdout.write(text);
      }),
    );
}

