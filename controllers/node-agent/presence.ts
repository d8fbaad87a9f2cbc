// The agent's presence in the cluster: it registers nodes/<host>, claims the node, keeps the claim
// alive, publishes heartbeats with pressure samples, and notices when the node is removed.
//
// The claim is heartbeats/<host>, created (never overwritten) on the agent's own lease. Whoever
// created it runs the node: its create revision is the fence every observed write carries, so a
// second agent started for the same host stands by instead of fighting over the containers, and
// an agent that lost its lease (paused past the TTL) cannot write until it claims the node again.
// A lost lease is re-granted at once, not at the next heartbeat.
//
// A node key that is gone is not a removal. Only a positive record is: drains/<host> in state
// `removed`, which the drain controller writes in the transaction that deletes the node, after
// this agent's registration. Without one the store lost the node (restored from a snapshot,
// restarted empty, a hand delete): the agent registers it again and keeps every container. A node
// value it cannot read is left as it is, and the heartbeat goes on (nodeAbsence).
//
// It also measures its clock's skew against the controllers' beacon (api/clock-skew.ts): each
// write of `clock` it receives is compared with its own clock, and the heartbeat carries the figure.
import { hostname } from 'node:os';
import { Backoff, sleep } from '../../src/backoff.js';
import { CLOCK_SKEW_WARN_MS, measureSkew, skewText, skewWarns } from '../../src/api/clock-skew.js';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ClockBeacon, type Heartbeat, type HeartbeatSpec, type Node, type NodeDrain, type NodeOverlay, type PressureSample } from '../../src/api/types.js';
import { isLeaseNotFound } from '../../src/store/errors.js';
import { claimKey } from '../../src/store/claim.js';
import { KeptLease } from '../../src/store/kept-lease.js';
import type { Store, Versioned } from '../../src/store/store.js';
import { commitActs, type Fence, type Op } from '../../src/store/writer.js';
import { VERSION } from '../../src/version.js';
import { agentMetrics } from './metrics.js';
import type { AgentOptions } from './options.js';

/** The node was removed from the cluster (jaco node remove) and --rejoin was not given. */
export class NodeRemovedError extends Error {
  override name = 'NodeRemovedError';
  readonly recoverable = false;
  constructor(readonly node: string) {
    super(`node ${node} was removed from the cluster; start with --rejoin to add it again`);
  }
}

/** What the store holds at nodes/<host>: its revisions, and its value or why it cannot be read. */
export interface NodeRecord {
  modRevision: number;
  createRevision: number;
  value?: Node;
  unreadable?: string;
}

/**
 * What a missing or present node key means to its agent. `removed` needs the positive record: a
 * removed drain written after the registration the agent knows (`registeredAt`, the node key's
 * create revision; unknown: any). A removal recorded before it was followed by a rejoin, and
 * says nothing of the registration that went missing now.
 */
export function nodeAbsence(node: NodeRecord | undefined, drain: Pick<Versioned<NodeDrain>, 'modRevision' | 'value'> | undefined, registeredAt?: number): 'present' | 'removed' | 'lost' {
  if (node) return 'present';
  if (drain?.value.status?.state !== 'removed') return 'lost';
  return registeredAt === undefined || drain.modRevision > registeredAt ? 'removed' : 'lost';
}

type Watcher = Awaited<ReturnType<ReturnType<Store['ns']['watch']>['create']>>;

/** The agent's options presence uses (registration, heartbeat), and what it asks of the agent. */
export interface PresenceOptions extends Pick<AgentOptions, 'node' | 'store' | 'timings' | 'statusIntervalMs' | 'capacity' | 'labels' | 'rejoin' | 'log' | 'address' | 'portRange' | 'clock'> {
  /** The latest pressure sample, when there is one (Docker up). */
  pressure(): Promise<PressureSample | undefined>;
  dockerUp(): boolean;
  /** nodes/<host> was found missing: the agent asks absence() what that means. */
  removed(): void;
  /** The claim was gained or lost: the agent acts only while it holds it. */
  claimChanged(held: boolean): void;
  /** The public half of the node's key, published on its Node (its copies are sealed to it). */
  secretsKey?: { id: string; publicKey: string };
  /** Its end of the WireGuard mesh (overlay.ts), published on its Node for the others to configure. */
  overlay?: NodeOverlay;
  /** Its logs and exec endpoint (api-server.ts), published on its Node for the CLI to dial. */
  apiEndpoint?: string;
  /** Its data root's disk and its overlay peers, as last sampled (degraded is judged from them). */
  health?(): Promise<Pick<HeartbeatSpec, 'disk' | 'overlay'>>;
}


export class Presence {
  /** The claim's lease: kept alive, and replaced at once when lost (src/store/kept-lease.ts). */
  private lease?: KeptLease;
  private leaseId?: string;
  private claim?: Fence;
  private claiming?: Promise<void>;
  private nodeWatch?: Watcher;
  private clockWatch?: Watcher;
  private clockWatchFailed = false;
  /** The latest skew measured against the controllers' beacon (ms, positive: this clock ahead). */
  private skewMs?: number;
  private heartbeatTimer?: NodeJS.Timeout;
  /** A heartbeat is on its way; beatNow during it asks for the next one at once. */
  private beating = false;
  private beatAgain = false;
  private failing = false;
  private stopped = false;
  private standbyLogged = false;
  /** The create revision of the node key this agent registered or heartbeats under. */
  private registeredAt?: number;
  /** The mod revision of an unreadable node value already logged (logged once per value). */
  private unreadableLogged?: number;

  constructor(private readonly opts: PresenceOptions) {}

  /** The host's wall clock (AgentOptions.clock). */
  private now(): number {
    return (this.opts.clock ?? Date.now)();
  }

  get node(): string {
    return this.opts.node;
  }

  /** The fence of this agent's writes while it holds the node. */
  fence(): Fence | undefined {
    return this.claim;
  }

  /** Registers the node and claims it (waiting while another agent holds it); starts the heartbeat. */
  async start(): Promise<void> {
    await this.register();
    await this.claimNode();
    await this.watchNode();
    await this.watchClock();
    this.scheduleHeartbeat(0);
  }

  /** Stops; with revoke the heartbeat goes with its lease (the node turns NotReady at once). */
  async stop(revoke = true): Promise<void> {
    this.stopped = true;
    clearTimeout(this.heartbeatTimer);
    await this.nodeWatch?.cancel().catch(() => undefined);
    await this.clockWatch?.cancel().catch(() => undefined);
    await this.lease?.stop({ revoke });
  }

  // ------------------------------------------------------------------ registration

  /**
   * Creates or updates nodes/<host>: status and labels are the agent's. What operators decide
   * (cordon, runtime labels, trust) is not: it lives in nodespecs/<host>, which the agent only
   * reads. A spec an older CLI left inside nodes/<host> is carried as it is while nodespecs/<host>
   * is absent (readers honour it then: an upgrade uncordons nothing) and dropped once it exists; the
   * agent never sets one. A value it cannot read is left as it is (reported; the agent runs on).
   * Throws NodeRemovedError on a node whose removal is recorded, unless --rejoin.
   */
  async register(): Promise<void> {
    const { store, node, labels, capacity, rejoin } = this.opts;
    for (;;) {
      const [cur, drain, decided] = await Promise.all([this.readNode(), this.removedDrain(), this.decidedExists()]);
      if (cur?.unreadable) {
        this.registeredAt = cur.createRevision;
        this.reportUnreadable(cur);
        return;
      }
      if (nodeAbsence(cur, drain, this.registeredAt) === 'removed') {
        if (!rejoin) throw new NodeRemovedError(node);
        this.opts.log.warn({ drain: drain!.value.spec }, `node ${node} was removed from the cluster; rejoining (--rejoin)`);
      }
      const now = new Date(this.now()).toISOString();
      const metadata = { ...(cur?.value!.metadata ?? { name: node, creationTimestamp: now }) };
      delete metadata.resourceVersion;
      if (Object.keys(labels).length) metadata.labels = labels;
      else delete metadata.labels;
      const next: Node = {
        apiVersion: API_VERSION,
        kind: 'Node',
        metadata,
        spec: cur?.value!.spec && !decided ? cur.value.spec : {},
        status: {
          capacity,
          agentVersion: VERSION,
          hostname: hostname(),
          registeredAt: cur?.value!.status?.registeredAt ?? now,
          ...(this.opts.address ? { address: this.opts.address } : {}),
          ...(this.opts.portRange ? { portRange: this.opts.portRange } : {}),
          ...(this.opts.secretsKey ? { secretsKey: this.opts.secretsKey } : {}),
          ...(this.opts.overlay ? { overlay: this.opts.overlay } : {}),
          ...(this.opts.apiEndpoint ? { api: { endpoint: this.opts.apiEndpoint } } : {}),
        },
      };
      const op: Op = cur ? { op: 'update', key: keys.node(node), value: next, modRevision: cur.modRevision } : { op: 'create', key: keys.node(node), value: next };
      const act = { label: `register ${node}`, ops: [op] };
      const res = await commitActs(store, [act]);
      if (res.committed.length) {
        this.registeredAt = cur ? cur.createRevision : res.landedAt.get(act);
        this.opts.log.info({ capacity, labels, created: !cur }, cur ? 'node registration updated' : 'node registered');
        return;
      }
      // Someone (the CLI cordoning) wrote the node meanwhile: read it again.
    }
  }

  /**
   * Whether nodespecs/<host> exists (what operators decided, which the agent only reads). A role
   * that may not read it (rbac.sh of an older release) reads as absent: an older CLI's spec is then
   * carried on, which is what readers honour without the key.
   */
  private async decidedExists(): Promise<boolean> {
    try {
      return (await this.opts.store.ns.get(keys.nodeSpec(this.node)).exec()).kvs.length > 0;
    } catch (e) {
      if (!/permission denied/i.test((e as Error).message)) throw e;
      this.opts.log.warn({ key: keys.nodeSpec(this.node) }, "cannot read what operators decided about this node: its etcd role needs read on nodespecs/<node> (deploy/etcd/rbac.sh); registering without it");
      return false;
    }
  }

  /** nodes/<host> as stored: absent, readable, or unreadable (not JSON, not a Node) — never a throw. */
  private async readNode(): Promise<NodeRecord | undefined> {
    const kv = (await this.opts.store.ns.get(keys.node(this.node)).exec()).kvs[0];
    if (!kv) return undefined;
    const meta = { modRevision: Number(kv.mod_revision), createRevision: Number(kv.create_revision) };
    let value: unknown;
    try {
      value = JSON.parse(kv.value.toString('utf8'));
    } catch (e) {
      return { ...meta, unreadable: `not JSON: ${(e as Error).message}` };
    }
    const kind = (value as { kind?: unknown } | null)?.kind;
    return kind === 'Node' ? { ...meta, value: value as Node } : { ...meta, unreadable: `kind ${JSON.stringify(kind)} where Node was expected` };
  }

  private reportUnreadable(n: NodeRecord): void {
    if (this.unreadableLogged === n.modRevision) return;
    this.unreadableLogged = n.modRevision;
    this.opts.log.error(
      { key: keys.node(this.node), reason: n.unreadable },
      'nodes/<node> holds a value this agent cannot read; it is left as it is (fix it, or delete it and restart the agent) and the node runs on: heartbeat and containers go on',
    );
  }

  /** drains/<host> when it records a removal (state removed). */
  private async removedDrain(): Promise<Versioned<NodeDrain> | undefined> {
    const drain = await this.opts.store.get<NodeDrain>(keys.drain(this.node));
    return drain?.value.status?.state === 'removed' ? drain : undefined;
  }

  /**
   * Why nodes/<host> is missing, read again: `present` (it is back, or never went), `removed` (a
   * removal recorded after this agent's registration), `lost` (no such record: the store lost it).
   */
  async absence(): Promise<'present' | 'removed' | 'lost'> {
    const [node, drain] = await Promise.all([this.readNode(), this.removedDrain()]);
    return nodeAbsence(node, drain, this.registeredAt);
  }

  // ------------------------------------------------------------------ the claim

  private async heartbeatValue(): Promise<Heartbeat> {
    const [pressure, health] = await Promise.all([this.opts.pressure(), this.opts.health?.()]);
    return {
      apiVersion: API_VERSION,
      kind: 'Heartbeat',
      metadata: { name: this.node },
      spec: {
        node: this.node,
        time: new Date(this.now()).toISOString(),
        intervalMs: this.opts.statusIntervalMs,
        agentVersion: VERSION,
        dockerUp: this.opts.dockerUp(),
        ...(this.skewMs !== undefined ? { clockSkewMs: this.skewMs } : {}),
        ...(pressure ? { pressure } : {}),
        ...health,
      },
    } as Heartbeat;
  }

  /** The claim's lease; a lost one takes the claim with it, and its replacement claims the node again. */
  private async grantLease(): Promise<string> {
    if (!this.lease) {
      const { heartbeatTtlSec, livenessKeepAliveMs } = this.opts.timings;
      const lease = new KeptLease(this.opts.store, { ttlSec: heartbeatTtlSec, keepAliveMs: livenessKeepAliveMs, log: this.opts.log });
      lease.on('lost', (_old, why) => {
        if (this.stopped) return;
        this.opts.log.warn({ why }, 'the node claim lease was lost; claiming the node again');
        this.leaseId = undefined;
        this.lost();
      });
      lease.on('renewed', (id) => {
        if (this.stopped) return;
        this.leaseId = id;
        void this.claimNode();
      });
      this.lease = lease;
    }
    this.leaseId = await this.lease.current();
    return this.leaseId;
  }

  private lost(): void {
    if (!this.claim) return;
    this.claim = undefined;
    this.opts.claimChanged(false);
  }

  /** A write found the claim gone (another agent holds the node, or the key was re-created): claim again. */
  reclaim(): void {
    this.lost();
    void this.claimNode();
  }

  /**
   * Creates heartbeats/<host> on a fresh lease. If another agent's heartbeat holds the key, stands
   * by until it goes (polling once per keepalive period). A create whose reply was lost is found
   * again by its lease and adopted.
   */
  claimNode(): Promise<void> {
    this.claiming ??= (async () => {
      const { store, node, timings } = this.opts;
      const key = keys.heartbeat(node);
      const retry = new Backoff(timings.backoffMinMs, timings.backoffMaxMs);
      while (!this.stopped) {
        try {
          // One lease for the whole standby: a new one only after the last was lost.
          const leaseId = this.leaseId ?? (await this.grantLease());
          const hb = await this.heartbeatValue();
          // Our own create, landed before its reply was lost, is found by its lease and adopted.
          const claimed = await claimKey(store, key, JSON.stringify(hb), leaseId);
          if (claimed.ours) {
            const { createRevision } = claimed;
            this.claim = { controller: `agent ${node}`, key, createRevision };
            this.standbyLogged = false;
            this.opts.log.info({ key, revision: createRevision }, 'node claimed');
            this.opts.claimChanged(true);
            return;
          }
          const kv = claimed.holder;
          if (!Number(kv.lease)) {
            // Every claim is on a lease: a heartbeat bound to none is nobody's live claim, and nothing
            // would ever remove it (a put that lost its lease, a hand edit). Remove it, unless it changed.
            this.opts.log.warn({ key }, 'the heartbeat is bound to no lease (it would never go); removing it to claim the node');
            await store.ns.if(key, 'Mod', '==', Number(kv.mod_revision)).then(store.ns.delete().key(key)).commit();
            continue;
          }
          if (this.lease?.wasOurs(kv.lease)) {
            // Our own claim on a lease we gave up (its revoke did not land): end it, claim at once.
            this.opts.log.info({ key, lease: kv.lease }, 'the heartbeat is held by this agent\'s own lost lease; revoking it');
            await store.revokeLease(kv.lease);
            await sleep(timings.backoffMinMs);
            continue;
          }
          if (!this.standbyLogged) this.opts.log.warn({ key, holderLease: kv.lease }, `another agent holds node ${node} (its heartbeat is alive); standing by until it goes`);
          this.standbyLogged = true;
          await sleep(timings.livenessKeepAliveMs);
          retry.reset();
        } catch (e) {
          if (isLeaseNotFound(e) && this.leaseId) {
            // The lease died before the claim was made: wait for its replacement.
            this.lease?.gone(this.leaseId, 'the claim was refused: lease not found');
            this.leaseId = undefined;
            continue;
          }
          const retryInMs = retry.next();
          this.opts.log.warn({ err: this.opts.store.unreachable(e).message, retryInMs }, 'could not claim the node; retrying');
          await sleep(retryInMs);
        }
      }
    })().finally(() => (this.claiming = undefined));
    return this.claiming;
  }

  // ------------------------------------------------------------------ heartbeat

  /** Fixed rate: the time a heartbeat takes does not stretch the interval others judge freshness by. */
  private scheduleHeartbeat(delayMs = this.opts.statusIntervalMs): void {
    if (this.stopped) return;
    this.heartbeatTimer = setTimeout(() => {
      const began = Date.now();
      this.beating = true;
      void this.heartbeat().finally(() => {
        this.beating = false;
        const again = this.beatAgain;
        this.beatAgain = false;
        this.scheduleHeartbeat(again ? 0 : Math.max(0, this.opts.statusIntervalMs - (Date.now() - began)));
      });
    }, delayMs);
  }

  /**
   * A heartbeat now rather than at the next interval: the agent has a first pressure sample (its
   * view of Docker just synced). The claim's heartbeat went before it, without one; waiting a whole
   * interval (30 s) left `jaco top` and the rebalancer without figures for the node's replicas.
   * Before the heartbeat loop starts there is nothing to do: the claim samples when it goes.
   */
  beatNow(): void {
    if (this.stopped) return;
    if (this.beating) this.beatAgain = true;
    else if (this.heartbeatTimer) {
      clearTimeout(this.heartbeatTimer);
      this.scheduleHeartbeat(0);
    }
  }

  /** Rewrites heartbeats/<host> (fenced by the claim), only while nodes/<host> exists. */
  private async heartbeat(): Promise<void> {
    if (this.stopped) return;
    // The claim and its lease as they are when the heartbeat starts: a lease lost while it is on its
    // way (a pause past the TTL) must not make it a put with no lease at all — the fence still holds
    // while etcd has the old lease, and a heartbeat bound to no lease never goes: the agent then
    // stood by for good behind its own heartbeat, its node's orphans running (the chaos run, seed 11).
    const fence = this.claim;
    const leaseId = this.leaseId;
    if (!fence || !leaseId) return; // claiming: the claim writes the first heartbeat
    try {
      const hb = await this.heartbeatValue();
      for (let attempt = 0; ; attempt++) {
        // Read raw: a value that is not JSON must not stop the heartbeat (the node would turn NotReady and be evacuated).
        const node = await this.readNode();
        if (!node) return this.opts.removed();
        this.registeredAt = node.createRevision;
        if (node.unreadable) this.reportUnreadable(node);
        const ops: Op[] = [
          { op: 'check', key: keys.node(this.node), modRevision: node.modRevision },
          { op: 'put', key: keys.heartbeat(this.node), value: hb, lease: leaseId },
        ];
        // A conflict is the CLI cordoning the node meanwhile: read it again.
        if ((await commitActs(this.opts.store, [{ label: 'heartbeat', ops }], fence)).committed.length || attempt >= 2) break;
      }
      await this.watchNode();
      await this.watchClock();
      if (this.failing) this.opts.log.info('heartbeat written again; etcd is reachable');
      this.failing = false;
    } catch (e) {
      agentMetrics.heartbeatFailures.inc();
      if (isLeaseNotFound(e)) {
        // The lease expired while we were away: the kept lease replaces it and the claim follows.
        this.lease?.gone(leaseId, 'a heartbeat was refused: lease not found');
        return;
      }
      if ((e as Error).name === 'FencedError') {
        // The claim is gone (the key was re-created by another agent): claim the node again.
        this.reclaim();
        return;
      }
      if (!this.failing) this.opts.log.warn({ err: this.opts.store.unreachable(e).message }, 'could not write the heartbeat; containers keep running, retrying every interval');
      this.failing = true;
    }
  }

  // ------------------------------------------------------------------ removal

  /** Watches nodes/<host> alone (the agent reads no other node); a broken watch is re-made on the next heartbeat. */
  private async watchNode(): Promise<void> {
    if (this.nodeWatch || this.stopped) return;
    const w = await this.opts.store.ns.watch().key(keys.node(this.node)).create();
    this.nodeWatch = w;
    w.on('delete', () => this.opts.removed());
    w.on('error', (e: Error) => {
      if (this.nodeWatch === w) this.nodeWatch = undefined;
      this.opts.log.debug({ err: e.message }, 'node watch ended; the next heartbeat checks the node and watches again');
    });
  }

  // ------------------------------------------------------------------ clock skew

  /**
   * Watches the controllers' clock beacon; each write received is measured against this clock.
   * Only writes seen as they happen count (a beacon read later would be as old as it waited). A
   * broken watch is re-made on the next heartbeat; one refused (an RBAC role without `clock`) is
   * logged once and the skew goes unmeasured.
   */
  private async watchClock(): Promise<void> {
    if (this.clockWatch || this.stopped) return;
    try {
      const w = await this.opts.store.ns.watch().key(keys.clock()).create();
      this.clockWatch = w;
      this.clockWatchFailed = false;
      w.on('put', (kv: { value: Buffer }) => {
        let beacon: ClockBeacon | undefined;
        try {
          beacon = JSON.parse(kv.value.toString('utf8')) as ClockBeacon;
        } catch {
          return;
        }
        const skew = beacon?.spec?.time ? measureSkew(beacon, this.now()) : undefined;
        if (skew !== undefined) this.measured(skew);
      });
      w.on('error', (e: Error) => {
        if (this.clockWatch === w) this.clockWatch = undefined;
        this.opts.log.debug({ err: e.message }, 'clock beacon watch ended; the next heartbeat watches again');
      });
    } catch (e) {
      if (!this.clockWatchFailed) this.opts.log.warn({ err: (e as Error).message, key: keys.clock() }, "cannot watch the controllers' clock beacon: this node's clock skew goes unmeasured (its etcd role needs read on clock: deploy/etcd/rbac.sh)");
      this.clockWatchFailed = true;
    }
  }

  private measured(skewMs: number): void {
    const was = skewWarns(this.skewMs);
    this.skewMs = skewMs;
    agentMetrics.clockSkew.set(skewMs / 1000);
    if (skewWarns(skewMs) && !was) this.opts.log.warn({ skewMs }, `this node's clock is ${skewText(skewMs)} off the controllers' (past ${CLOCK_SKEW_WARN_MS / 1000}s): run NTP on this host; jaco works on, but times read across nodes are off`);
    else if (was && !skewWarns(skewMs)) this.opts.log.info({ skewMs }, "this node's clock is back in step with the controllers'");
  }

  /** The latest measured skew (ms; undefined: not measured yet). */
  clockSkewMs(): number | undefined {
    return this.skewMs;
  }

  /** The heartbeat goes at once with its lease (a removed node gets no heartbeat back). */
  async release(): Promise<void> {
    await this.stop(true);
  }

  health(): Record<string, unknown> {
    return { claimed: !!this.claim, heartbeatFailing: this.failing, ...(this.skewMs !== undefined ? { clockSkewMs: this.skewMs } : {}) };
  }
}
