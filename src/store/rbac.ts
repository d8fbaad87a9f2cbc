// Who may touch which keys: the one definition of jaco's etcd roles (etcd RBAC), and applying it
// through the etcd3 client's auth API. Each controller has a user of its own that writes only the
// prefixes it owns (docs/store.md, "Keys": "written by"); each node's agent only its own node's keys;
// each node's ingress only its own report. `jaco etcd rbac` and `jaco up` apply it; the simulation
// checks every act a controller plans against its grants (test/sim/invariants.ts), so this table
// cannot drift from what the controllers write.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keys } from '../api/keys.js';
import { Range } from 'etcd3';
import { seedNodeSpecs } from './nodespec-seed.js';
import { prefixEnd, type Store } from './store.js';

export type Access = 'read' | 'readwrite';

/** One permission of a role: a key, or every key under a prefix (relative to the store prefix). */
export interface Grant {
  key: string;
  prefix: boolean;
  access: Access;
}

export type Principal = 'controller' | 'controllers' | 'agent' | 'ingress' | 'viewer';

/** A role and its user (same name), and the env file its process reads its credentials from. */
export interface RoleDef {
  name: string;
  principal: Principal;
  grants: Grant[];
  /** Roles the user holds besides its own (the `all` user holds every controller's role). */
  alsoRoles?: string[];
  envFile: string;
  /** The node of an agent's or ingress's role. */
  node?: string;
}

const under = (key: string, access: Access): Grant => ({ key, prefix: true, access });
const exactly = (key: string, access: Access): Grant => ({ key, prefix: false, access });

/**
 * What each controller writes (besides its own election keys and audit records): the prefixes of
 * docs/store.md's key table where it is a writer, as the code has it. A controller reads the whole
 * prefix: its cache is one watch over the common prefix of what it reads, so its snapshot is taken
 * at one revision (splitting it into a watch per prefix, as an agent's, would give that up).
 */
export const CONTROLLER_WRITES: Readonly<Record<string, readonly string[]>> = {
  // Membership and placement: replicas, their counters, commands, decisions, status, the
  // service's endpoints, its volumes' homes, and the network it allocates (IPAM); and the reports
  // a replica left on a node that is gone (cleanup of observed/<node>/<replica>).
  scheduler: [
    keys.desiredOf(), keys.observedOf(), keys.commandsOf(), keys.counters(), keys.deploymentStatuses(), keys.decisions(), keys.endpointsAll(), keys.volumeHomes(),
    keys.disruptionsAll(), keys.addresses(), keys.subnets(), keys.subnetIndexes(), keys.serviceAddresses(), keys.serviceAddressNumbers(),
  ],
  // The revision of existing replicas, its plans, its part of the status, and the disruption budget.
  rollout: [keys.desiredOf(), keys.rollouts(), keys.deploymentStatuses(), keys.commandsOf(), keys.disruptionsAll(), keys.decisions()],
  // Moves off a node, the drain's progress, and a removed node's keys (node, heartbeat, subnets, addresses).
  drain: [keys.desiredOf(), keys.drains(), keys.decisions(), keys.disruptionsAll(), keys.nodes(), 'nodespecs/', keys.heartbeats(), keys.addresses(), keys.subnets(), keys.subnetIndexes()],
  // Pressure-driven moves.
  rebalancer: [keys.desiredOf(), keys.decisions(), keys.disruptionsAll()],
  // The cluster key's public half, the secrets' and configs' status, each node's sealed copies.
  secrets: [keys.clusterKey(), keys.secrets(), keys.configs(), keys.copiesOf()],
  // The clock beacon agents measure their skew against.
  clock: [keys.clock()],
};

export const CONTROLLER_NAMES = Object.keys(CONTROLLER_WRITES);

/** The user (and role) of one controller, and of `jaco controller all` (every controller's role). */
export const controllerUser = (name: string): string => (name === 'all' ? 'jaco-controller' : `jaco-controller-${name}`);
export const agentUser = (node: string): string => `jaco-agent-${node}`;
export const ingressUser = (node: string): string => `jaco-ingress-${node}`;

export function controllerRole(name: string): RoleDef {
  const writes = CONTROLLER_WRITES[name];
  if (!writes) throw new Error(`no controller named ${JSON.stringify(name)}; one of ${CONTROLLER_NAMES.join(', ')}`);
  return {
    name: controllerUser(name),
    principal: 'controller',
    grants: [
      // Read everything (see CONTROLLER_WRITES); readwrite what it owns. etcd takes the union.
      under('', 'read'),
      ...writes.map((p) => (p.endsWith('/') ? under(p, 'readwrite') : exactly(p, 'readwrite'))),
      under(keys.leaders(name), 'readwrite'),
      under(keys.audits(), 'readwrite'),
    ],
    envFile: `controller-${name}.env`,
  };
}

/**
 * `jaco controller all`: one process, one cache, every controller. Its user holds every
 * controller's role and nothing more — separate clients per controller inside one process would
 * guard nothing (the process holds every credential) and cost a connection and a watch each.
 */
export function allControllersRole(): RoleDef {
  return { name: controllerUser('all'), principal: 'controllers', grants: [], alsoRoles: CONTROLLER_NAMES.map(controllerUser), envFile: 'controller.env' };
}

/** A node-agent: its own node's keys, and what it reads to run its replicas. */
export function agentRole(node: string): RoleDef {
  return {
    name: agentUser(node),
    principal: 'agent',
    grants: [
      under(keys.desiredOf(node), 'read'),
      under(keys.commandsOf(node), 'read'),
      under(keys.observedOf(node), 'readwrite'),
      // Its copies of the secrets and configs its replicas use, sealed to its own key: only its own.
      under(keys.copiesOf(node), 'read'),
      // Its status (registration, address, keys) and its heartbeat; the cluster's uid, created by
      // whichever process asks first.
      exactly(keys.node(node), 'readwrite'),
      exactly(keys.heartbeat(node), 'readwrite'),
      exactly(keys.cluster(), 'readwrite'),
      // What operators decide for it (cordon, labels): read only, so it cannot uncordon itself.
      exactly(`nodespecs/${node}`, 'read'),
      exactly(keys.drain(node), 'read'),
      // The controllers' clock beacon, which it measures its skew against (a watch: a range).
      under(keys.clock(), 'read'),
      // What it pulls images with: registries' users, CAs and flags (a password reaches it as its
      // copy of a secret) and the image setting (a watch: a range).
      under(keys.registries(), 'read'),
      under(keys.imageSettings(), 'read'),
      // The services' addresses: the names its resolver answers (docs/networking.md, Names).
      under(keys.serviceAddresses(), 'read'),
      // The WireGuard mesh (--overlay): every node's published key and endpoint, and subnets.
      under(keys.nodes(), 'read'),
      under(keys.subnets(), 'read'),
    ],
    envFile: `agent-${node}.env`,
    node,
  };
}

/** A node's ingress: reads what it routes, writes only its own report; never touches replicas. */
export function ingressRole(node: string): RoleDef {
  return {
    name: ingressUser(node),
    principal: 'ingress',
    grants: [
      ...[keys.deployments(), keys.endpointsAll(), keys.nodes(), keys.serviceAddresses()].map((p) => under(p, 'read')),
      // The cluster network's ranges: the service range it makes local to its node.
      under(keys.networkConfig(), 'read'),
      exactly(keys.ingress(node), 'readwrite'),
    ],
    envFile: `ingress-${node}.env`,
    node,
  };
}

/** A reader of everything that writes nothing: the dashboard (without --allow-actions), a monitoring job. */
export function viewerRole(): RoleDef {
  return { name: 'jaco-viewer', principal: 'viewer', grants: [under('', 'read')], envFile: 'viewer.env' };
}

/** Every role of a cluster with these nodes: each controller's, `all`'s, the viewer's, each node's agent and ingress. */
export function clusterRoles(nodes: readonly string[]): RoleDef[] {
  return [...CONTROLLER_NAMES.map(controllerRole), allControllersRole(), viewerRole(), ...nodes.flatMap((n) => [agentRole(n), ingressRole(n)])];
}

/** Whether grants allow `access` to a key (relative to the store prefix), as etcd judges a single key. */
export function allows(grants: readonly Grant[], key: string, access: Access): boolean {
  return grants.some((g) => (access === 'read' || g.access === 'readwrite') && (g.prefix ? key.startsWith(g.key) : key === g.key));
}

/** The grants a user holds through its role and the roles it also holds. */
export function grantsOf(role: RoleDef): Grant[] {
  return [...role.grants, ...(role.alsoRoles ?? []).flatMap((r) => (r.startsWith('jaco-controller-') ? controllerRole(r.slice('jaco-controller-'.length)).grants : []))];
}

export interface AppliedUser {
  user: string;
  envFile: string;
  /** Set when the user was created now (an existing user keeps its password, never shown again). */
  password?: string;
}

/** A password of 32 URL-safe characters. */
export function newPassword(): string {
  return randomBytes(24).toString('base64url');
}

/**
 * Makes etcd's roles and users match the definitions: each role holds exactly its grants (stale
 * ones revoked, so re-running after an upgrade narrows an old broad role), each user exactly its
 * roles. Idempotent: an existing user keeps its password. `passwords` names the password of a user
 * created now (else a random one). Needs a user allowed to administer auth (root), or auth off.
 */
export async function applyRoles(store: Store, roles: readonly RoleDef[], passwords: Readonly<Record<string, string>> = {}): Promise<AppliedUser[]> {
  const client = store.client;
  const abs = (k: string) => store.prefix + k;
  const [existingRoles, existingUsers] = await Promise.all([client.getRoles(), client.getUsers()]);
  const roleNames = new Set(existingRoles.map((r) => r.name));
  const userNames = new Set(existingUsers.map((u) => u.name));
  // Roles another role's user holds are made first; the rest in parallel (each a few raft writes).
  const one = async (def: RoleDef): Promise<AppliedUser> => {
    const role = client.role(def.name);
    if (!roleNames.has(def.name)) await role.create();
    const want = new Map(def.grants.map((g) => [`${g.prefix ? 'p' : 'k'}:${abs(g.key)}`, g]));
    for (const have of await role.permissions()) {
      const start = have.range.start.toString('utf8');
      const isPrefix = have.range.end.length > 0;
      const g = want.get(`${isPrefix ? 'p' : 'k'}:${start}`);
      const access = have.permission === 'Readwrite' ? 'readwrite' : have.permission === 'Read' ? 'read' : 'write';
      if (g && g.access === access && (!isPrefix || have.range.end.toString('latin1') === prefixEnd(abs(g.key)))) want.delete(`${isPrefix ? 'p' : 'k'}:${start}`);
      else await role.revoke({ permission: have.permission, range: have.range });
    }
    for (const g of want.values()) {
      const permission = g.access === 'readwrite' ? 'Readwrite' : 'Read';
      await role.grant({ permission, range: g.prefix ? Range.prefix(abs(g.key)) : new Range(abs(g.key)) });
    }
    const user = client.user(def.name);
    let password: string | undefined;
    if (!userNames.has(def.name)) {
      password = passwords[def.name] ?? newPassword();
      await user.create(password);
    }
    const wantRoles = new Set([def.name, ...(def.alsoRoles ?? [])]);
    for (const r of await user.roles()) if (!wantRoles.delete(r.name)) await user.removeRole(r.name);
    for (const r of wantRoles) await user.addRole(r);
    return { user: def.name, envFile: def.envFile, ...(password !== undefined ? { password } : {}) };
  };
  const held = new Set(roles.flatMap((r) => r.alsoRoles ?? []));
  const first = await Promise.all(roles.filter((r) => held.has(r.name)).map(one));
  const rest = await Promise.all(roles.filter((r) => !held.has(r.name)).map(one));
  const byUser = new Map([...first, ...rest].map((a) => [a.user, a]));
  const applied = roles.map((r) => byUser.get(r.name)!);
  return applied;
}

/**
 * The env file a process reads its credentials from: its user and password, and, given the
 * directory where its host keeps its etcd client certificate (`jaco cert etcd-client`), the CA and
 * that certificate (ca.pem, cert.pem, cert.key there).
 */
export function envFileText(user: string, password: string, clientTlsDir?: string): string {
  const tls = clientTlsDir ? `JACO_ETCD_CACERT=${join(clientTlsDir, 'ca.pem')}\nJACO_ETCD_CERT=${join(clientTlsDir, 'cert.pem')}\nJACO_ETCD_KEY=${join(clientTlsDir, 'cert.key')}\n` : '';
  return `JACO_ETCD_USER=${user}\nJACO_ETCD_PASSWORD=${password}\n${tls}`;
}

export interface ProvisionOptions {
  /** Where the env files of users created now go (mode 600). */
  outDir: string;
  /**
   * A user that exists but has no env file in outDir gets a new password and its file (`jaco up`:
   * the data directory is the only place its users' passwords live).
   */
  resetMissing?: boolean;
  /** Passwords of users created now, by user (else random). */
  passwords?: Readonly<Record<string, string>>;
  /** Also make the root user (if missing: its password in root.env) and turn authentication on. */
  enableAuth?: boolean;
  /** The directory, on the hosts, of their etcd client certificate: each env file names its files too. */
  clientTlsDir?: string;
}

/**
 * Applies the roles of a cluster with these nodes and writes one env file per user created now
 * (an existing user keeps its password and gets none: delete the user to rotate it).
 */
export function provisionRbac(store: Store, nodes: readonly string[], opts: ProvisionOptions): Promise<AppliedUser[]> {
  return provisionRoles(store, clusterRoles(nodes), opts);
}

/**
 * provisionRbac for the given roles only (a node joining later: its agent's and ingress's). With
 * the roles go the nodes' first nodespecs/<host> (seedNodeSpecs): the role that takes from an
 * agent the right to decide about its node comes with a decision it cannot touch.
 */
export async function provisionRoles(store: Store, roles: readonly RoleDef[], opts: ProvisionOptions): Promise<AppliedUser[]> {
  mkdirSync(opts.outDir, { recursive: true, mode: 0o700 });
  const applied = await applyRoles(store, roles, opts.passwords);
  await seedNodeSpecs(store, [...new Set(roles.flatMap((r) => (r.node ? [r.node] : [])))]);
  if (opts.enableAuth) {
    const users = new Set((await store.client.getUsers()).map((u) => u.name));
    if (!users.has('root')) {
      const password = opts.passwords?.root ?? newPassword();
      await store.client.user('root').create(password);
      applied.push({ user: 'root', envFile: 'root.env', password });
    }
    await store.client.user('root').addRole('root');
  }
  if (opts.resetMissing)
    for (const a of applied)
      if (a.password === undefined && !existsSync(join(opts.outDir, a.envFile))) {
        a.password = opts.passwords?.[a.user] ?? newPassword();
        await store.client.user(a.user).setPassword(a.password);
      }
  for (const a of applied) if (a.password !== undefined) writeFileSync(join(opts.outDir, a.envFile), envFileText(a.user, a.password, opts.clientTlsDir), { mode: 0o600 });
  if (opts.enableAuth) await store.client.auth.authEnable({});
  return applied;
}
