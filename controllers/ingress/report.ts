// What one node's ingress routes, published as ingresses/<node> (IngressStatus) for `jaco get
// endpoints`, `jaco describe service` and the dashboard: each route's servers with jaco's state
// (ready, drain) and HAProxy's own check. The ingress's pass writes nothing; this status is a
// report beside it, bound to the ingress's own lease so it goes when the ingress stops or dies,
// and written only when what it says changes (a moment's time alone is no change).
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type IngressRoute, type IngressStatus, type IngressStatusSpec } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import { KeptLease } from '../../src/store/kept-lease.js';
import type { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import type { HaproxyView } from './decide.js';
import { frontendName, type BindFailure } from './haproxy.js';

/** HAProxy's check status per server, by `<backend>/<server>` (from `show stat`). */
export type CheckStatus = ReadonlyMap<string, string>;

/** The status of one ingress from what it routes (pure: the clock is `now`). */
export function ingressStatusOf(
  node: string,
  view: HaproxyView,
  checks: CheckStatus,
  running: boolean,
  conflicts: readonly { published: number; winner: string; losers: string[] }[],
  now: number,
  unbound: readonly BindFailure[] = [],
): IngressStatus {
  // The published ports (a service's own ports are answered alike on every node: its endpoints say it).
  const routes: IngressRoute[] = (view.routes ?? []).filter((r) => !r.addresses).map((r) => ({
    published: r.published,
    deployment: r.deployment,
    service: r.service,
    servers: [...(view.servers.get(r.backend) ?? new Map()).entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, s]) => {
        const check = checks.get(`${r.backend}/${name}`);
        return { replica: s.replica, node: s.node, address: s.addr, port: s.port, state: s.state, ...(check ? { check } : {}) };
      }),
  }));
  const spec: IngressStatusSpec = {
    node,
    ...(view.address ? { address: view.address } : {}),
    time: new Date(now).toISOString(),
    haproxy: running && view.configKey !== undefined ? 'running' : 'down',
    routes,
    ...(conflicts.length ? { conflicts: conflicts.map((c) => ({ published: c.published, routedTo: c.winner, ignored: c.losers })) } : {}),
    ...(unbound.length ? { unbound: unboundRoutes(view, unbound) } : {}),
  };
  return { apiVersion: API_VERSION, kind: 'IngressStatus', metadata: { name: node }, spec };
}

/** The routes of the frontends HAProxy could not bind, by port. */
function unboundRoutes(view: HaproxyView, unbound: readonly BindFailure[]): NonNullable<IngressStatusSpec['unbound']> {
  const out: NonNullable<IngressStatusSpec['unbound']> = [];
  for (const f of unbound) {
    const r = (view.routes ?? []).find((x) => frontendName(x) === f.frontend);
    if (r) out.push({ published: r.published, deployment: r.deployment, service: r.service, address: f.address, reason: f.reason });
  }
  return out.sort((a, b) => a.published - b.published || (a.address < b.address ? -1 : 1));
}

/** What a status says, without the moment it was written: a change of this is worth a write. */
const substance = (s: IngressStatus) => JSON.stringify({ ...s.spec, time: undefined });

/**
 * Writes an ingress's status on its own kept lease: one write at a time, the latest status wins,
 * and a renewed lease puts the last one again (a lost lease took the key with it).
 */
export class StatusReporter {
  private readonly lease: KeptLease;
  private latest?: IngressStatus;
  private written?: string;
  private writing = false;
  private stopped = false;

  constructor(private readonly store: Store, private readonly node: string, ttlSec: number, private readonly log: Logger) {
    this.lease = new KeptLease(store, { ttlSec, log });
    this.lease.on('renewed', () => {
      this.written = undefined;
      void this.flush();
    });
  }

  start(): void {
    void this.lease.start().then(() => this.flush(), () => undefined);
  }

  /** Reports a status; written unless it says what the last written one said. */
  report(status: IngressStatus): void {
    this.latest = status;
    void this.flush();
  }

  /** Stops; the status goes with the revoked lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.lease.stop({ revoke: true });
  }

  private async flush(): Promise<void> {
    if (this.writing || this.stopped || !this.latest || !this.lease.id) return;
    const status = this.latest;
    if (substance(status) === this.written) return;
    this.writing = true;
    try {
      await commitAtomic(this.store, [{ label: `ingress status ${this.node}`, ops: [{ op: 'put', key: keys.ingress(this.node), value: status, lease: this.lease.id }] }]);
      this.written = substance(status);
    } catch (e) {
      // The next report (or a renewed lease) tries again.
      this.log.warn({ err: (e as Error).message }, 'could not write the ingress status');
    } finally {
      this.writing = false;
    }
    if (this.latest !== status) void this.flush();
  }
}
