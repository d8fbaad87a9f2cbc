// The node's resolver, as a controller on the agent's manager (unelected, like the agent's own
// pass): it reads the node's desired replicas and the cluster's service addresses, decides which
// addresses to answer on and which names to answer (pure: namesOf), and runs dns.ts there. A
// cluster-network replica's sandbox names the resolver at the gateways of its prefixes
// (sandbox.ts), so the resolver answers on every gateway the node's replicas use — put on the
// node's loopback first — and nothing before the first cluster-network replica comes. docs/networking.md, Names.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { ReplicaDesired, ServiceAddress } from '../../src/api/types.js';
import { onClusterNetwork } from '../../src/api/spec.js';
import type { Logger } from '../../src/observability/log.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import type { NameAddresses, NameTableInput } from './dns-table.js';
import { DnsServer } from './dns.js';
import { resolverAddresses } from './sandbox.js';

const execFileP = promisify(execFile);

/** What the node's resolver should be: where it answers, and its whole name table. */
export interface NodeNames {
  /** The gateways of the node's cluster-network replicas, sorted: empty, no resolver. */
  listen: string[];
  table: { names: Map<string, NameAddresses>; zones: string[] };
}

/**
 * The names of the cluster: `SERVICE.DEPLOYMENT` and `ALIAS.DEPLOYMENT` for each of its aliases
 * (a compose service's own name, its network aliases) → the service's address (IPv4 as A, IPv6 as
 * AAAA), every deployment a zone (a name under it that is not a service is NXDOMAIN, not
 * forwarded); and where to answer: the resolver addresses of every desired cluster replica.
 */
export function namesOf(desired: Iterable<ReplicaDesired>, services: Iterable<ServiceAddress>): NodeNames {
  const listen = new Set<string>();
  for (const d of desired) if (d.spec.address && onClusterNetwork(d.spec.template)) for (const a of resolverAddresses(d.spec.address)) listen.add(a);
  const names = new Map<string, NameAddresses>();
  const zones = new Set<string>();
  const list = [...services];
  for (const s of list) {
    const { deployment, service, ipv4, ipv6 } = s.spec;
    names.set(`${service}.${deployment}`, { ipv4: [ipv4], ipv6: [ipv6] });
    zones.add(deployment);
  }
  // An alias never takes a service's own name (names compare without case), nor another's alias.
  for (const s of list) {
    const { deployment, ipv4, ipv6, aliases = [] } = s.spec;
    for (const alias of aliases) {
      const name = `${alias}.${deployment}`.toLowerCase();
      if (!names.has(name)) names.set(name, { ipv4: [ipv4], ipv6: [ipv6] });
    }
  }
  return { listen: [...listen].sort(), table: { names, zones: [...zones].sort() } };
}

/** Where the resolver answers: every address it answered before, and the plan's (sorted). */
export function listenSet(listening: string, planned: readonly string[]): string[] {
  return [...new Set([...listening.split(' ').filter(Boolean), ...planned])].sort();
}

export interface NodeResolverDeps {
  log: Logger;
}

/** Names outside the cluster are forwarded to the nameservers of the node's own resolv.conf. */
const HOST_RESOLV_CONF = '/etc/resolv.conf';

interface NamesPass extends PassResult<null, unknown> {
  plan: NodeNames;
}

/**
 * The address on the node's loopback (`ip addr replace`): a socket binds it before any replica's
 * veth holds it as its gateway (CNI ptp adds it there too: an address may sit on several links),
 * and after the last one goes. A local route would do for IPv4, not for IPv6: its bind wants an
 * address on a link.
 */
async function addToLoopback(address: string): Promise<void> {
  const v6 = address.includes(':');
  await execFileP('ip', [v6 ? '-6' : '-4', 'addr', 'replace', `${address}/${v6 ? 128 : 32}`, 'dev', 'lo', ...(v6 ? ['nodad'] : [])]);
}

export class NodeResolver {
  private server?: DnsServer;
  /** The listen set the server runs with (joined). */
  private listening = '';
  private busy = false;
  private stopped = false;
  private lastError?: string;
  private names = 0;

  constructor(private readonly deps: NodeResolverDeps) {}

  spec(): ControllerSpec<null, NodeNames, unknown, NamesPass> {
    return {
      name: 'names',
      reads: ['desired', 'serviceAddresses'],
      elected: false,
      // A failed bind is tried again.
      tickMs: 5000,
      initialState: () => null,
      ready: () => !this.busy && !this.stopped,
      snapshot: ({ cache }) => namesOf(
        [...cache.kind<ReplicaDesired>('desired').items.values()].map((v) => v.value),
        [...cache.kind<ServiceAddress>('serviceAddresses').items.values()].map((v) => v.value),
      ),
      decide: (_s, snap) => ({ plan: snap, acts: [] }),
      perform: ({ plan }) => {
        this.busy = true;
        void this.apply(plan).finally(() => {
          this.busy = false;
        });
      },
    };
  }

  /**
   * Answers where the plan says, with its names. It never stops answering an address it took: a
   * replica whose desired record has gone (moved away, drained) may still run and ask names until
   * its container stops, and the node's gateways are the node's for its life. A new address
   * restarts the server with every address (once, normally: the node's first cluster replica).
   */
  private async apply(plan: NodeNames): Promise<void> {
    const wanted = listenSet(this.listening, plan.listen);
    const listen = wanted.join(' ');
    try {
      if (listen !== this.listening) {
        for (const a of wanted) await addToLoopback(a);
        const server = new DnsServer({ listen: wanted.map((address) => ({ address, port: 53 })), resolvConf: HOST_RESOLV_CONF, log: this.deps.log });
        await this.server?.stop();
        this.server = undefined;
        await server.start();
        this.server = server;
        this.listening = listen;
      }
      if (this.server) {
        const rejected = this.server.setNames(plan.table as NameTableInput);
        if (rejected.length) this.deps.log.warn({ rejected }, 'names the resolver cannot answer');
        this.names = plan.table.names.size;
      }
      this.lastError = undefined;
    } catch (e) {
      this.lastError = (e as Error).message;
      this.deps.log.warn({ err: this.lastError, listen: plan.listen }, "the node's resolver could not start; will retry");
    }
  }

  /** For the agent's /healthz. */
  health(): Record<string, unknown> {
    return { listening: this.server?.addresses ?? [], names: this.names, ...(this.lastError ? { lastError: this.lastError } : {}) };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
    await this.server?.stop();
    this.server = undefined;
  }
}
