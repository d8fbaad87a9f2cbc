// Cross-field rules of a Deployment that a schema cannot state. Each rule has a name (reported as
// the failed rule) and an exact message; all violations are reported, not the first only.
import { DEFAULT_PORT_RANGE, fixedHostPorts, normalizePorts, publishedPorts } from './ports.js';
import type { Deployment, PortRange, ServiceSpec, VolumeMount } from './types.js';
import type { Path, ValidationIssue } from './schema.js';
import { NAME_PATTERN } from './crds.js';
import { fileTargetProblem, serviceFiles } from './files.js';

/** Replica ids (<deployment>-<service>-<index>) must fit in a DNS label with room for the index. */
export const MAX_DEPLOYMENT_SERVICE_CHARS = 52;

type Rule = (name: string, svc: ServiceSpec, at: Path) => ValidationIssue[];

const issue = (rule: string, path: Path, message: string): ValidationIssue => ({ rule, path, message });

const rules: Rule[] = [
  /** GPUs by count or by id, not both: Docker takes a device request with either, never both. */
  function gpusOneWay(name, svc, at) {
    if (svc.resources?.gpus === undefined || svc.resources.gpuIds === undefined) return [];
    return [issue('gpus', [...at, 'resources', 'gpuIds'], `service "${name}" sets both resources.gpus and resources.gpuIds; ask for GPUs by count or by id, not both`)];
  },
  /** update.canary adds replicas beside the service's: meaningless for global, a second writer for a volume. */
  function canaryNeedsReplicas(name, svc, at) {
    const u = svc.update;
    const path = [...at, 'update', 'canary'];
    if (u?.autoPromote !== undefined && !u.canary) return [issue('canary', [...at, 'update', 'autoPromote'], `service "${name}" sets update.autoPromote without update.canary; set canary: N, or remove autoPromote`)];
    if (!u?.canary) return [];
    if (svc.placement?.mode === 'global') return [issue('canary', path, `service "${name}" uses placement=global; update.canary needs replicas (a canary is an extra replica beside them)`)];
    const writable = (svc.volumes ?? []).find((v) => v.type === 'volume' || (v.type === 'bind' && !v.readOnly));
    if (writable && writable.type !== 'anonymous') return [issue('canary', path, `service "${name}" mounts ${writable.type} "${writable.source}" read-write; a canary would be a second writer beside the replica: remove update.canary`)];
    return [];
  },
  /** A job runs to completion: nothing routes to it, it is no per-node daemon, and it has no rollout for a canary. */
  function jobShape(name, svc, at) {
    if (svc.mode !== 'job') return svc.job ? [issue('job', [...at, 'job'], `service "${name}" sets job without mode: job; set mode: job, or remove job`)] : [];
    const out: ValidationIssue[] = [];
    const published = normalizePorts(svc).find((p) => p.published !== undefined);
    if (published) out.push(issue('job', [...at, 'ports'], `service "${name}" is a job (mode: job) and publishes port ${published.published}; a job runs to completion, nothing is routed to it: remove published`));
    if (svc.placement?.mode === 'global') out.push(issue('job', [...at, 'placement', 'mode'], `service "${name}" is a job (mode: job) and uses placement=global; a job runs its replicas once, not one per node: use spread, pack or hosts`));
    if (svc.update?.canary) out.push(issue('job', [...at, 'update', 'canary'], `service "${name}" is a job (mode: job); a job is not rolled out, so it has no canary: remove update.canary`));
    return out;
  },
  function globalHasNoReplicas(name, svc, at) {
    return svc.placement?.mode === 'global' && svc.replicas !== undefined
      ? [issue('global-replicas', [...at, 'replicas'], `service "${name}" uses placement=global; remove replicas (global runs one replica per ready node)`)]
      : [];
  },
  /**
   * Seed 004: a named volume lives on one node and has one writer, so its service runs one replica
   * and is never global. A writable bind mount keeps data on whichever host runs the replica: one
   * replica, or global (each node its own path, as a log shipper's positions file). A read-only bind
   * (a config, a secret, /var/log for a shipper) holds nothing: any replicas, any mode.
   */
  function volumesMeanOneReplica(name, svc, at) {
    const named = (svc.volumes ?? []).filter((v) => v.type === 'volume');
    const writableBinds = (svc.volumes ?? []).filter((v): v is Extract<VolumeMount, { source: string }> => v.type === 'bind' && !v.readOnly);
    const global = svc.placement?.mode === 'global';
    if (named.length && global)
      return [issue('volume-replicas', [...at, 'volumes'], `service "${name}" has named volumes and uses placement=global; a service with named volumes runs at most 1 replica (volumes are local to one node)`)];
    if ((svc.replicas ?? 1) <= 1 || global) return [];
    if (named.length)
      return [issue('volume-replicas', [...at, 'replicas'], `service "${name}" has named volumes; it may run at most 1 replica (volumes are local to one node), got ${svc.replicas}`)];
    if (writableBinds.length)
      return [
        issue(
          'volume-replicas',
          [...at, 'replicas'],
          `service "${name}" has a writable bind mount (${writableBinds[0]!.source}); its data stays on one host, so it may run at most 1 replica, got ${svc.replicas}: mount it read-only, or use placement=global (one per node)`,
        ),
      ];
    return [];
  },
  function hostsModeNeedsHosts(name, svc, at) {
    const p = svc.placement;
    if (p?.mode === 'hosts') {
      if (!p.hosts?.length) return [issue('hosts-required', [...at, 'placement', 'hosts'], `service "${name}" uses placement=hosts; list at least one host in placement.hosts`)];
      const n = svc.replicas ?? 1;
      if (n > new Set(p.hosts).size)
        return [issue('hosts-replicas', [...at, 'replicas'], `service "${name}" wants ${n} replicas but placement.hosts lists ${new Set(p.hosts).size} host(s); hosts places at most one replica per host`)];
      return [];
    }
    return p?.hosts?.length ? [issue('hosts-without-mode', [...at, 'placement', 'hosts'], `service "${name}" lists placement.hosts but its mode is ${p.mode ?? 'spread'}; set placement.mode: hosts`)] : [];
  },
  function healthTestForm(name, svc, at) {
    const t = svc.healthcheck?.test;
    return t && t[0] !== 'CMD' && t[0] !== 'CMD-SHELL'
      ? [issue('healthcheck-test', [...at, 'healthcheck', 'test', 0], `service "${name}": healthcheck.test must start with "CMD" or "CMD-SHELL", got ${JSON.stringify(t[0])}`)]
      : [];
  },
  /** A health check is one of three forms: an exec test, an http check or a tcp check. */
  function healthOneForm(name, svc, at) {
    const h = svc.healthcheck;
    if (!h) return [];
    const forms = (['test', 'http', 'tcp'] as const).filter((f) => h[f] !== undefined);
    if (forms.length === 1) return [];
    const path = [...at, 'healthcheck'];
    return forms.length
      ? [issue('healthcheck-form', [...path, forms[1]!], `service "${name}": a healthcheck has one form, got ${forms.join(' and ')}; keep one of test, http, tcp`)]
      : [issue('healthcheck-form', path, `service "${name}": a healthcheck needs one of test (run in the container), http or tcp (run by the node-agent)`)];
  },
  /** A check's port named as a port of the service must be one (a number is any container port). */
  function healthPortNamed(name, svc, at) {
    const h = svc.healthcheck;
    const form = h?.http ? 'http' : h?.tcp ? 'tcp' : undefined;
    const port = form && h![form]!.port;
    if (typeof port !== 'string') return [];
    const names = normalizePorts(svc).map((p) => p.name);
    return names.includes(port)
      ? []
      : [issue('healthcheck-port', [...at, 'healthcheck', form!, 'port'], `service "${name}": healthcheck.${form}.port names port ${JSON.stringify(port)}, which the service does not list${names.length ? ` (its ports: ${names.join(', ')})` : ''}; name one of them or give a number`)];
  },
  function volumeSources(name, svc, at) {
    const out: ValidationIssue[] = [];
    const targets = new Set<string>();
    (svc.volumes ?? []).forEach((v, i) => {
      if (v.type !== 'anonymous' && typeof v.source !== 'string')
        out.push(issue('volume-source', [...at, 'volumes', i], `service "${name}": a ${v.type} mount needs a source (an anonymous volume is type: anonymous)`));
      else if (v.type === 'anonymous' && 'source' in v)
        out.push(issue('volume-source', [...at, 'volumes', i, 'source'], `service "${name}": an anonymous volume has no source (name it, type: volume, to keep it)`));
      else if (v.type === 'bind' && !v.source.startsWith('/'))
        out.push(issue('volume-source', [...at, 'volumes', i, 'source'], `service "${name}": a bind mount's source must be an absolute host path, got ${JSON.stringify(v.source)}`));
      if (v.type === 'volume' && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(v.source))
        out.push(issue('volume-source', [...at, 'volumes', i, 'source'], `service "${name}": volume name ${JSON.stringify(v.source)} may contain only letters, digits, _ . -`));
      if (targets.has(v.target)) out.push(issue('volume-target', [...at, 'volumes', i, 'target'], `service "${name}": two volumes mount at ${v.target}`));
      targets.add(v.target);
    });
    return out;
  },
  function uniquePorts(name, svc, at) {
    const seen = new Set<number>();
    const names = new Set<string>();
    const published = new Set<number>();
    const out: ValidationIssue[] = [];
    (svc.ports ?? []).forEach((p, i) => {
      const host = typeof p === 'number' ? p : p.hostPort;
      if (host !== undefined && seen.has(host)) out.push(issue('ports-unique', [...at, 'ports', i], `service "${name}" lists port ${host} twice`));
      if (host !== undefined) seen.add(host);
      const n = normalizePorts({ ports: [p] })[0]!;
      if (names.has(n.name)) out.push(issue('ports-unique', [...at, 'ports', i], `service "${name}" has two ports named ${n.name}`));
      names.add(n.name);
      if (n.published !== undefined && n.protocol === 'udp')
        out.push(issue('ports-published-udp', [...at, 'ports', i, 'published'], `service "${name}" publishes UDP port ${n.published}: the ingress forwards TCP only; remove published (a UDP port is reached at each replica's own address, or on host networking at its hostPort)`));
      if (n.published !== undefined && published.has(n.published)) out.push(issue('ports-unique', [...at, 'ports', i], `service "${name}" publishes port ${n.published} twice`));
      if (n.published !== undefined) published.add(n.published);
    });
    return out;
  },
  /** Secrets and configs: each at a path of its own, none outside a file's place, none over a volume. */
  function filePaths(name, svc, at) {
    const out: ValidationIssue[] = [];
    const seen = new Map<string, string>();
    for (const v of svc.volumes ?? []) seen.set(v.target, v.type === 'anonymous' ? 'an anonymous volume' : `volume ${v.source}`);
    for (const f of serviceFiles(svc)) {
      const path = [...at, f.kind === 'secret' ? 'secrets' : 'configs', f.index];
      const bad = fileTargetProblem(f.kind, f.ref);
      if (bad) out.push(issue('file-target', [...path, 'target'], `service "${name}": ${f.kind} ${f.ref.source}: ${bad}`));
      const other = seen.get(f.target);
      if (other) out.push(issue('file-target', path, `service "${name}": ${f.kind} ${f.ref.source} and ${other} both appear at ${f.target}`));
      seen.set(f.target, `${f.kind} ${f.ref.source}`);
    }
    return out;
  },
  // Docker takes any name without "=" (Elasticsearch reads discovery.type, Spring reads a-b.c):
  // refuse only what cannot be passed, or could not be read back.
  function envNames(name, svc, at) {
    return Object.keys(svc.env ?? {})
      .filter((k) => !/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(k))
      .map((k) => issue('env-name', [...at, 'env', k], `service "${name}": ${JSON.stringify(k)} is not a valid environment variable name (letters, digits, _ . -; not starting with a digit)`));
  },
];

/** dependsOn names other services of the deployment, without cycles. */
function dependencyIssues(d: Deployment): ValidationIssue[] {
  const services = d.spec.services;
  const out: ValidationIssue[] = [];
  for (const [name, svc] of Object.entries(services))
    for (const dep of Object.keys(svc.dependsOn ?? {})) {
      const at: Path = ['spec', 'services', name, 'dependsOn', dep];
      if (dep === name) out.push(issue('depends-on', at, `service "${name}" depends on itself`));
      else if (!services[dep]) out.push(issue('depends-on', at, `service "${name}" depends on "${dep}", which is not a service of this deployment`));
      else if (svc.dependsOn![dep]!.condition === 'service_completed_successfully' && services[dep]!.mode !== 'job')
        out.push(issue('depends-on', [...at, 'condition'], `service "${name}" waits for "${dep}" to complete (service_completed_successfully), but "${dep}" is not a job: set mode: job on it, or use service_started or service_healthy`));
    }
  // A cycle would hold every service in it forever.
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (n: string, trail: string[]): string[] | undefined => {
    if (state.get(n) === 'done' || !services[n]) return undefined;
    if (state.get(n) === 'visiting') return [...trail.slice(trail.indexOf(n)), n];
    state.set(n, 'visiting');
    for (const dep of Object.keys(services[n]!.dependsOn ?? {}).sort()) {
      const cycle = dep !== n ? visit(dep, [...trail, n]) : undefined;
      if (cycle) return cycle;
    }
    state.set(n, 'done');
    return undefined;
  };
  for (const n of Object.keys(services).sort()) {
    const cycle = visit(n, []);
    if (cycle) {
      out.push(issue('depends-on', ['spec', 'services', cycle[0]!, 'dependsOn'], `dependsOn forms a cycle: ${cycle.join(' → ')}`));
      break;
    }
  }
  return out;
}

/**
 * Seed 004's single writer is per volume: a named volume (scoped to its deployment) mounted
 * read-write by one service is mounted by no other service of the deployment, in any mode — the
 * other would attach a volume in use. Several services may share a volume all read-only.
 */
function volumeWriterIssues(d: Deployment): ValidationIssue[] {
  const mounts = new Map<string, { service: string; index: number; readOnly: boolean }[]>();
  for (const name of Object.keys(d.spec.services).sort())
    (d.spec.services[name]!.volumes ?? []).forEach((v, index) => {
      if (v.type === 'volume') mounts.set(v.source, [...(mounts.get(v.source) ?? []), { service: name, index, readOnly: !!v.readOnly }]);
    });
  const out: ValidationIssue[] = [];
  for (const [volume, ms] of mounts) {
    const services = [...new Set(ms.map((m) => m.service))];
    const writer = ms.find((m) => !m.readOnly);
    if (services.length < 2 || !writer) continue;
    for (const m of ms.filter((x) => x.service !== writer.service))
      out.push(
        issue(
          'volume-single-writer',
          ['spec', 'services', m.service, 'volumes', m.index],
          `volume "${volume}" is mounted read-write by service "${writer.service}" and also by service "${m.service}"; a named volume has one writer (it lives on one node): mount it in one service, or read-only in all`,
        ),
      );
  }
  return out;
}

/** Cross-field violations of a Deployment that already passed its schema. */
export function deploymentRuleIssues(d: Deployment): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const [name, svc] of Object.entries(d.spec.services)) {
    const at: Path = ['spec', 'services', name];
    if (!new RegExp(NAME_PATTERN).test(name))
      out.push(issue('service-name', at, `service name ${JSON.stringify(name)} must be lowercase letters, digits and '-', starting and ending with a letter or digit`));
    if (d.metadata.name.length + name.length + 1 > MAX_DEPLOYMENT_SERVICE_CHARS)
      out.push(issue('name-length', at, `"${d.metadata.name}-${name}" is ${d.metadata.name.length + name.length + 1} characters; deployment and service names together may have at most ${MAX_DEPLOYMENT_SERVICE_CHARS}`));
    for (const rule of rules) out.push(...rule(name, svc, at));
  }
  out.push(...dependencyIssues(d), ...volumeWriterIssues(d), ...aliasIssues(d));
  return out;
}

/** An alias is one more name of its service: never another service's name, nor another's alias (names compare without case). */
function aliasIssues(d: Deployment): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const said = new Map(Object.keys(d.spec.services).map((n) => [n.toLowerCase(), { what: 'the name', of: n }]));
  for (const [name, svc] of Object.entries(d.spec.services))
    (svc.aliases ?? []).forEach((alias, i) => {
      const had = said.get(alias.toLowerCase());
      if (!had) said.set(alias.toLowerCase(), { what: 'an alias', of: name });
      else if (had.of !== name) out.push(issue('alias', ['spec', 'services', name, 'aliases', i], `alias ${JSON.stringify(alias)} is ${had.what} of service "${had.of}": a name finds one service`));
    });
  return out;
}

/**
 * Replica ids are <deployment>-<service>-<index>, or -<host> for global services: two services
 * whose "<deployment>-<service>-" stems are equal would name replicas alike, and a global
 * service's stem that begins another service's stem could, with the right host name. Checked at
 * apply over every deployment that will exist; each conflict is described once.
 */
export function replicaIdConflicts(deployments: { name: string; spec: Deployment['spec'] }[]): string[] {
  const stems = deployments
    .flatMap((d) => Object.entries(d.spec.services).map(([svc, s]) => ({ d: d.name, svc, stem: `${d.name}-${svc}-`, global: s.placement?.mode === 'global' })))
    .sort((a, b) => (a.stem < b.stem ? -1 : a.stem > b.stem ? 1 : a.d < b.d ? -1 : a.d > b.d ? 1 : 0));
  const out: string[] = [];
  for (let i = 0; i < stems.length; i++)
    for (let j = i + 1; j < stems.length && stems[j]!.stem.startsWith(stems[i]!.stem); j++) {
      const a = stems[i]!;
      const b = stems[j]!;
      if (a.d === b.d && a.svc === b.svc) continue;
      if (a.stem === b.stem) out.push(`deployment "${a.d}" service "${a.svc}" and deployment "${b.d}" service "${b.svc}" would both name replicas "${a.stem}<n>"; rename one`);
      else if (a.global) out.push(`global service "${a.svc}" of deployment "${a.d}" names replicas "${a.stem}<host>", which could equal replicas "${b.stem}<n>" of deployment "${b.d}" service "${b.svc}"; rename one`);
    }
  return out;
}

/**
 * Published ports that cannot all be answered, over every deployment that will exist: every
 * node's ingress binds each published port on the node's address, so a port published twice
 * would route to one service only (the ingress keeps the first, controllers/ingress), and a port
 * some replica binds on the node — a fixed host port, or one the scheduler may hand out from a
 * node's dynamic range — would fail that container or the ingress. Checked at apply; each clash
 * is described once. With no node registered yet, the agents' default range is checked.
 */
export function publishedPortConflicts(deployments: { name: string; spec: Deployment['spec'] }[], nodeRanges: { node: string; range: PortRange }[]): string[] {
  const out: string[] = [];
  const who = (p: { deployment: string; service: string }) => `deployment "${p.deployment}" service "${p.service}"`;
  const first = new Map<number, { deployment: string; service: string }>();
  const published = publishedPorts(deployments);
  for (const p of published) {
    const have = first.get(p.published);
    if (!have) first.set(p.published, p);
    else if (have.deployment !== p.deployment || have.service !== p.service)
      out.push(`port ${p.published} is published by ${who(have)} and by ${who(p)}; every ingress answers a published port for one service: change one`);
  }
  const fixed = new Map<number, { deployment: string; service: string }>();
  for (const d of deployments)
    for (const [service, svc] of Object.entries(d.spec.services)) for (const port of fixedHostPorts(svc)) if (!fixed.has(port)) fixed.set(port, { deployment: d.name, service });
  const byRange = new Map<string, { range: PortRange; nodes: string[] }>();
  for (const { node, range } of nodeRanges) {
    const k = `${range.min}-${range.max}`;
    byRange.set(k, { range, nodes: [...(byRange.get(k)?.nodes ?? []), node] });
  }
  const ranges = byRange.size ? [...byRange.values()] : [{ range: DEFAULT_PORT_RANGE, nodes: [] }];
  for (const [port, p] of first) {
    const host = fixed.get(port);
    if (host) out.push(`port ${port} is published by ${who(p)} and is a fixed host port of ${who(host)}; the ingress binds it on every node's address: change one`);
    for (const { range, nodes } of ranges) {
      if (port < range.min || port > range.max) continue;
      const whose = nodes.length ? `of node${nodes.length > 1 ? 's' : ''} ${nodes.sort().join(', ')}` : "(the agents' default)";
      out.push(`port ${port} published by ${who(p)} lies in the dynamic host port range ${range.min}-${range.max} ${whose}, from which the scheduler hands ports to replicas: publish a port outside it`);
    }
  }
  return out;
}
