// The node's end of the WireGuard full mesh between nodes (docs/networking.md, "Between nodes: the WireGuard overlay"), as a
// controller on the agent's manager (unelected, like the agent's own pass): it reads nodes/ and
// subnets/, decides in overlay-decide.ts, and carries the steps out here with `ip` and `wg` —
// making the interface with the kernel's WireGuard where there is one, else running Debian's
// wireguard-go as a child of the agent, started again whenever it is gone. It writes nothing to
// etcd: what it publishes (key, endpoint) goes on the Node at registration (presence.ts).
//
// The interface outlives the agent, as containers do: a restarted agent adopts the interface (and
// the wireguard-go) it finds instead of making another; only the node's removal deletes it.
import { execFile, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Node, NodeOverlay, NodeSubnet, OverlaySample } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import type { ControllerSpec, PassResult, Runner } from '../../src/runtime/runner.js';
import type { Timings } from '../../src/timings.js';
import { Backoff } from '../../src/backoff.js';
import { overlayMetrics } from './metrics.js';
import { monotonicNow } from './running-clock.js';
import { decideOverlay, KEEPALIVE_SEC, overlayNodes, OVERLAY_MTU, OVERLAY_ROUTE_PROTO, skipWhy, type OverlayHealth, type OverlayPlan, type OverlaySettings, type OverlaySnapshot, type OverlayStep, type PeerStats } from './overlay-decide.js';
import { loadOrCreateOverlayKey } from './overlay-key.js';
import { NO_INTERFACE, parseIpAddr, parseIpRoutes, parseWgDump, type InterfaceState } from './overlay-observe.js';
import { joinHostPort } from '../../src/api/network.js';
import { spawnLogged } from '../../src/child.js';

/** jaco agent --overlay, --overlay-port, --overlay-interface. */
export interface OverlayOptions {
  interface: string;
  port: number;
}

export interface OverlayDeps extends OverlayOptions {
  node: string;
  /** The node's address: its endpoint is <address>:<port>. */
  address: string;
  /** The agent's state directory: the private key, and wireguard-go's log. */
  stateDir: string;
  timings: Timings;
  log: Logger;
  /** Whether the overlay may act: the agent holds its node and is not being removed. */
  active(): boolean;
}

/** How often the interface is looked at when nothing asks (its counters and handshakes, a hand edit, an exit). */
const OBSERVE_EVERY_MS = { production: 15_000, fast: 2_000 } as const;
/** How long a new wireguard-go has to make its interface and answer on its socket. */
const USERSPACE_START_MS = 5_000;
/** A wireguard-go that ran at least this long before it exited is started again at once; a shorter life backs off. */
const USERSPACE_STEADY_MS = 10_000;
const COMMAND_TIMEOUT_MS = 10_000;

export class OverlayCommandError extends Error {
  override name = 'OverlayCommandError';
}

interface OverlayPass extends PassResult<null> {
  plan: OverlayPlan;
}

/** Runs `program args` and returns its stdout; a failure carries the program's own words. */
function run(program: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(program, args, { timeout: COMMAND_TIMEOUT_MS, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'ENOENT') return reject(new OverlayCommandError(`${program} is not installed (${program === 'ip' ? 'iproute2' : 'wireguard-tools'}): run scripts/ensure-system.sh`));
      reject(new OverlayCommandError(`${program} ${args.join(' ')}: ${(stderr || e.message).trim()}`));
    });
  });
}

export class Overlay {
  /** What the agent publishes on its Node. */
  readonly publication: NodeOverlay;
  readonly settings: OverlaySettings;
  private readonly observeEveryMs: number;
  private readonly log: Logger;
  private observed?: InterfaceState;
  /** When it was last looked at, on the monotonic clock (0: look again at once). */
  private lookedAt = 0;
  /** The observation without counters and handshakes: a change of it is news to the next pass. */
  private shape = '';
  private busy = false;
  private again = false;
  private stopped = false;
  /** How the interface is made here, once known: the kernel's WireGuard, or wireguard-go. */
  private mode?: 'kernel' | 'userspace';
  private child?: ChildProcess;
  /** Between restarts of a wireguard-go that keeps dying soon after it started. */
  private readonly restarts = new Backoff(1_000, 30_000);
  private runner?: Runner<null, OverlaySnapshot, unknown, OverlayPass>;
  private lastPlan?: OverlayPlan;
  /** Per peer key: the received bytes last seen, and when they last grew (the probe of reachability). */
  private readonly heard = new Map<string, { rx: number; at: number }>();
  /** Per peer key: when a plan first wanted it (its grace before it can be judged unreachable). */
  private readonly planned = new Map<string, number>();
  private lastError?: string;
  private lastSkipped = '';
  private labelled = new Set<string>();

  constructor(private readonly deps: OverlayDeps) {
    this.log = deps.log.child({ part: 'overlay' });
    const key = loadOrCreateOverlayKey(deps.stateDir);
    this.log.info({ publicKey: key.publicKey, keyFile: key.keyFile, created: key.created }, key.created ? 'made the overlay key' : 'overlay key read');
    this.settings = { interface: deps.interface, port: deps.port, mtu: OVERLAY_MTU, keepaliveSec: KEEPALIVE_SEC[deps.timings.name], keyFile: key.keyFile, publicKey: key.publicKey };
    this.publication = { publicKey: key.publicKey, endpoint: joinHostPort(deps.address, deps.port) };
    this.observeEveryMs = OBSERVE_EVERY_MS[deps.timings.name];
  }

  /** Looks at the interface once before the first pass (one left by an earlier agent is adopted). */
  async start(): Promise<void> {
    await this.refresh().catch((e: Error) => this.failed('observe', e));
    if (this.observed?.exists) this.log.info({ interface: this.settings.interface, kind: this.observed.kind, peers: this.observed.peers.length }, 'adopting the overlay interface already there');
  }

  /** The overlay as the agent's manager runs it. */
  spec(): ControllerSpec<null, OverlaySnapshot, unknown, OverlayPass> {
    return {
      name: 'overlay',
      reads: ['nodes', 'subnets'],
      elected: false,
      tickMs: this.observeEveryMs,
      initialState: () => null,
      // Not waiting for a first look: a pass without one decides nothing and looks.
      ready: () => !this.stopped && this.deps.active(),
      snapshot: ({ cache }) => ({
        node: this.deps.node,
        settings: this.settings,
        nodes: overlayNodesOf(cache.kind<Node>('nodes').items.values(), cache.kind<NodeSubnet>('subnets').items.values()),
        ...(this.observed ? { iface: this.observed } : {}),
      }),
      decide: (_s, snap, now) => ({ plan: decideOverlay(snap, now), acts: [] }),
      perform: ({ plan }) => {
        this.report(plan);
        void this.reconcile(plan.steps);
      },
      attach: (runner) => {
        this.runner = runner;
        return () => (this.runner = undefined);
      },
    };
  }

  /** For the agent's /healthz: how the overlay stands, and what it could not do. */
  health(): Record<string, unknown> {
    const h: Partial<OverlayHealth> = this.lastPlan?.health ?? { up: false, reason: 'not_observed', interface: this.settings.interface };
    return {
      ...h,
      publicKey: this.publication.publicKey,
      endpoint: this.publication.endpoint,
      ...(this.mode ? { mode: this.mode } : {}),
      ...(this.child?.pid ? { wireguardGoPid: this.child.pid } : {}),
      ...(this.lastPlan?.skipped.length ? { skipped: this.lastPlan.skipped } : {}),
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }

  /**
   * Its peers' reachability for the heartbeat (overlay health, src/api/eligibility.ts): every node
   * the mesh should reach, with its latest handshake as `wg show` last gave it. A peer that is not
   * configured, or an interface that is gone, has none. The persistent keepalive is the probe: a
   * live peer sends one every 25 s, so its received bytes grow (heardAt) and its session
   * re-handshakes at least every two minutes. `since` is when a plan first wanted the peer: one
   * just added (or not configured yet: the plan runs ahead of the last look) has had no chance.
   */
  sample(): OverlaySample | undefined {
    const plan = this.lastPlan;
    if (!plan) return undefined;
    const seen = new Map((this.observed?.peers ?? []).map((o) => [o.publicKey, o.latestHandshake]));
    const iso = (ms: number | undefined) => (ms ? new Date(ms).toISOString() : undefined);
    return {
      peers: plan.peers.map((p) => {
        const at = seen.get(p.publicKey);
        const times = { handshakeAt: iso(at ? at * 1000 : undefined), heardAt: iso(seen.has(p.publicKey) ? this.heard.get(p.publicKey)?.at : undefined), since: iso(this.planned.get(p.publicKey)) };
        return { node: p.node, ...Object.fromEntries(Object.entries(times).filter(([, v]) => v)) };
      }),
    };
  }

  /** The agent stops: the interface stays (traffic between nodes keeps flowing; the next agent adopts it). */
  stop(): void {
    this.stopped = true;
  }

  /** The node was removed from the cluster: its interface goes (wireguard-go exits with it). */
  async remove(): Promise<void> {
    this.stopped = true;
    try {
      await run('ip', ['link', 'del', 'dev', this.settings.interface]);
      this.log.info({ interface: this.settings.interface }, 'removed the overlay interface (the node left the cluster)');
    } catch (e) {
      if (!/does not exist|Cannot find device/i.test((e as Error).message)) this.log.warn({ err: (e as Error).message }, 'could not remove the overlay interface');
    }
  }

  // ------------------------------------------------------------------ carrying out

  /**
   * One round after a pass: the steps (each on its own: one that fails is logged and the rest still
   * run, except after a failed create), then a fresh look at the interface. A change seen asks
   * for another pass; a failure waits for the next tick rather than trying again at once.
   */
  private async reconcile(steps: readonly OverlayStep[]): Promise<void> {
    if (this.busy) {
      this.again = true;
      return;
    }
    if (!steps.length && this.lookedAt && monotonicNow() - this.lookedAt < this.observeEveryMs) return;
    this.busy = true;
    let failed = false;
    try {
      if (steps.length) failed = await this.carryOut(steps);
      const before = this.shape;
      await this.refresh();
      if (this.again || (!failed && this.shape !== before)) this.runner?.trigger();
    } catch (e) {
      this.failed('observe', e as Error);
    } finally {
      this.busy = false;
      this.again = false;
    }
  }

  /** Runs the steps in order; whether any failed. */
  private async carryOut(steps: readonly OverlayStep[]): Promise<boolean> {
    const done: string[] = [];
    let failed = false;
    for (const s of steps) {
      if (this.stopped) break;
      try {
        if (s.op === 'create') await this.create();
        else await run(s.op, s.args);
        overlayMetrics.steps.inc({ op: s.op, result: 'ok' });
        done.push(s.why);
      } catch (e) {
        overlayMetrics.steps.inc({ op: s.op, result: 'failed' });
        this.failed(s.why, e as Error);
        failed = true;
        if (s.op === 'create') break;
      }
    }
    if (done.length) this.log.info({ interface: this.settings.interface, steps: done }, 'overlay interface configured');
    if (!failed && this.lastError) {
      this.log.info('overlay steps succeed again');
      this.lastError = undefined;
    }
    return failed;
  }

  /** Makes the interface: the kernel's WireGuard when it has it (known after the first try), else wireguard-go. */
  private async create(): Promise<void> {
    const dev = this.settings.interface;
    if (this.mode !== 'userspace') {
      try {
        await run('ip', ['link', 'add', 'dev', dev, 'type', 'wireguard']);
        this.mode = 'kernel';
        return;
      } catch (e) {
        if (this.mode === 'kernel') throw e;
        this.mode = 'userspace';
        this.log.info({ err: (e as Error).message }, 'no WireGuard in this kernel: running wireguard-go');
      }
    }
    await this.startUserspace();
  }

  /**
   * wireguard-go in the foreground as the agent's child, in its own process group (a signal to the
   * agent is not one to it) and not holding the agent's exit: it keeps carrying traffic while an
   * agent restarts. Its exit is noticed and it is started again by the next pass.
   */
  private async startUserspace(): Promise<void> {
    const dev = this.settings.interface;
    const logFile = join(this.deps.stateDir, 'wireguard-go.log');
    // WG_PROCESS_FOREGROUND: what wireguard-go sets for itself when it daemonizes; here it also
    // silences its banner claiming the kernel has WireGuard (it reads the version, not the module).
    const child = spawnLogged('wireguard-go', ['-f', dev], logFile, { detached: true, fileMode: 0o600, env: { ...process.env, WG_PROCESS_FOREGROUND: '1', LOG_LEVEL: 'error' } });
    child.unref();
    this.child = child;
    const spawnError = new Promise<Error>((r) => child.once('error', r));
    let startedAt: number | undefined;
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (this.stopped) return;
      overlayMetrics.userspaceExits.inc();
      this.lookedAt = 0;
      // One that died while starting is this start's failure (thrown below): the next tick tries
      // again, never at once — that would spin as fast as it can die.
      if (startedAt === undefined) return;
      const lived = monotonicNow() - startedAt;
      if (lived >= USERSPACE_STEADY_MS) this.restarts.reset();
      const wait = lived >= USERSPACE_STEADY_MS ? 0 : this.restarts.next();
      this.log.warn({ code, signal, pid: child.pid, livedMs: lived, restartInMs: wait, log: tail(logFile) }, 'wireguard-go exited; the overlay interface goes with it and is made again');
      setTimeout(() => this.runner?.trigger(), wait).unref();
    });
    const deadline = monotonicNow() + USERSPACE_START_MS;
    for (;;) {
      const err = await Promise.race([spawnError, new Promise<undefined>((r) => setTimeout(() => r(undefined), 50))]);
      if (err) throw new OverlayCommandError((err as NodeJS.ErrnoException).code === 'ENOENT' ? 'wireguard-go is not installed: run scripts/ensure-system.sh' : `wireguard-go: ${err.message}`);
      if (child.exitCode !== null || child.signalCode !== null) throw new OverlayCommandError(`wireguard-go -f ${dev} exited at once (${child.exitCode ?? child.signalCode}): ${tail(logFile)}`);
      // Ready once `wg` reaches it through its socket.
      if (await run('wg', ['show', dev, 'listen-port']).then(() => true, () => false)) break;
      if (monotonicNow() > deadline) {
        child.kill('SIGTERM');
        throw new OverlayCommandError(`wireguard-go -f ${dev} did not answer within ${USERSPACE_START_MS / 1000}s: ${tail(logFile)}`);
      }
    }
    startedAt = monotonicNow();
    this.log.info({ interface: dev, pid: child.pid, log: logFile }, 'wireguard-go started');
  }

  // ------------------------------------------------------------------ observing

  /** Looks at the interface: link and addresses, key and peers, the overlay's routes. */
  private async refresh(): Promise<void> {
    const dev = this.settings.interface;
    const link = parseIpAddr(await run('ip', ['-j', '-d', 'addr', 'show', 'dev', dev]).catch((e: Error) => (/does not exist/.test(e.message) ? '[]' : Promise.reject(e))));
    let state: InterfaceState;
    if (!link.exists) state = NO_INTERFACE;
    else {
      const [wg, r4, r6] = await Promise.all([
        run('wg', ['show', dev, 'dump']).then(parseWgDump, () => undefined),
        run('ip', ['-j', '-4', 'route', 'show', 'dev', dev, 'proto', OVERLAY_ROUTE_PROTO]),
        run('ip', ['-j', '-6', 'route', 'show', 'dev', dev, 'proto', OVERLAY_ROUTE_PROTO]),
      ]);
      state = { ...link, wireguard: !!wg, peers: wg?.peers ?? [], routes: [...parseIpRoutes(r4), ...parseIpRoutes(r6)], ...(wg?.publicKey ? { publicKey: wg.publicKey } : {}), ...(wg?.listenPort ? { listenPort: wg.listenPort } : {}) };
      if (!this.mode) this.mode = link.kind === 'wireguard' ? 'kernel' : link.kind === 'tun' ? 'userspace' : undefined;
    }
    this.observed = state;
    this.lookedAt = monotonicNow();
    // heardAt is published as a time on this host's wall clock, beside the heartbeat's own.
    const wall = Date.now();
    for (const p of state.peers) {
      const h = this.heard.get(p.publicKey);
      if (!h || p.rxBytes > h.rx) this.heard.set(p.publicKey, { rx: p.rxBytes, at: h || p.rxBytes > 0 ? wall : 0 });
      else if (p.rxBytes < h.rx) h.rx = p.rxBytes; // counters reset (the peer re-added): wait for growth again
    }
    this.shape = JSON.stringify({ ...state, peers: state.peers.map((p) => ({ ...p, latestHandshake: 0, rxBytes: 0, txBytes: 0 })) });
  }

  // ------------------------------------------------------------------ reporting

  private report(plan: OverlayPlan): void {
    const prev = this.lastPlan?.health;
    this.lastPlan = plan;
    const wanted = new Set(plan.peers.map((p) => p.publicKey));
    for (const k of this.planned.keys()) if (!wanted.has(k)) this.planned.delete(k);
    for (const k of wanted) if (!this.planned.has(k)) this.planned.set(k, Date.now());
    const h = plan.health;
    overlayMetrics.up.set(h.up ? 1 : 0);
    overlayMetrics.peers.set({ state: 'expected' }, h.peers.expected);
    overlayMetrics.peers.set({ state: 'configured' }, h.peers.configured);
    this.peerMetrics(plan.stats);
    if (prev && prev.up !== h.up) {
      if (h.up) this.log.info({ peers: h.peers.configured }, 'overlay up');
      else this.log.warn({ reason: h.reason, missing: h.missing }, 'overlay not up');
    }
    const skipped = plan.skipped.map(skipWhy).join('; ');
    if (skipped !== this.lastSkipped && skipped) this.log.info({ skipped: plan.skipped }, `nodes that are no peers: ${skipped}`);
    this.lastSkipped = skipped;
  }

  private peerMetrics(stats: readonly PeerStats[]): void {
    const now = new Set(stats.map((s) => s.node));
    for (const gone of this.labelled)
      if (!now.has(gone)) {
        overlayMetrics.handshakeAge.remove({ peer: gone });
        overlayMetrics.transfer.remove({ peer: gone, direction: 'rx' });
        overlayMetrics.transfer.remove({ peer: gone, direction: 'tx' });
      }
    for (const s of stats) {
      if (s.handshakeAgeSec !== undefined) overlayMetrics.handshakeAge.set({ peer: s.node }, s.handshakeAgeSec);
      else overlayMetrics.handshakeAge.remove({ peer: s.node });
      overlayMetrics.transfer.set({ peer: s.node, direction: 'rx' }, s.rxBytes);
      overlayMetrics.transfer.set({ peer: s.node, direction: 'tx' }, s.txBytes);
    }
    this.labelled = now;
  }

  /** Logs a failure once per distinct message (it is tried again every pass). */
  private failed(what: string, e: Error): void {
    const msg = `${what}: ${e.message}`;
    if (msg !== this.lastError) this.log.warn({ err: e.message, step: what }, 'overlay step failed; trying again on the next pass');
    this.lastError = msg;
  }
}

/** nodes/ and subnets/ as the cache holds them, for the overlay's snapshot. */
function overlayNodesOf(nodes: Iterable<{ value: Node }>, subnets: Iterable<{ value: NodeSubnet }>) {
  return overlayNodes([...nodes].map((n) => n.value), [...subnets].map((s) => s.value));
}

/** The last lines of wireguard-go's log (why it exited). */
function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-5).join(' | ');
  } catch {
    return '';
  }
}
