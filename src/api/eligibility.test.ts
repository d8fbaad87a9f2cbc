import { describe, expect, it } from 'vitest';
import type { Heartbeat, HeartbeatSpec, ReplicaCommand } from './types.js';
import { conditionLines, DEFAULT_NODE_SETTINGS, degradedBecause, degradedCauses, degradedText, failingServicesOf, nodeCondition, NodeSettingsError, resolveNodeSettings, restartCountsAgainstNode, unreachableReports } from './eligibility.js';

const NOW = Date.parse('2026-01-01T12:00:00Z');
const Gi = 1024 ** 3;
const ago = (ms: number) => new Date(NOW - ms).toISOString();
const hb = (extra: Partial<HeartbeatSpec> = {}): Heartbeat => ({ apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name: 'a' }, spec: { node: 'a', time: ago(0), intervalMs: 1000, agentVersion: 't', dockerUp: true, ...extra } });
// 110 GiB of which 10 are root's reserve: full is used over used + available, as df counts it.
const disk = (usedPercent: number) => ({ disk: { path: '/var/lib/docker', totalBytes: 110 * Gi, usedBytes: usedPercent * Gi, availableBytes: (100 - usedPercent) * Gi, capped: false, driver: 'overlay2', backingFs: 'extfs' } });
const peers = (...handshakes: (number | undefined)[]) => ({ overlay: { peers: handshakes.map((h, i) => ({ node: `p${i}`, ...(h === undefined ? {} : { handshakeAt: ago(h) }) })) } });
const S = DEFAULT_NODE_SETTINGS;
/** The same heartbeat written `ms` later by its agent (its samples as they were). */
const later = (h: Heartbeat, ms: number): Heartbeat => ({ ...h, spec: { ...h.spec, time: new Date(Date.parse(h.spec.time) + ms).toISOString() } });
/** Every time in a heartbeat shifted by `ms`: an agent whose clock is that far off. */
const skewed = (h: Heartbeat, ms: number): Heartbeat => JSON.parse(JSON.stringify(h), (k, v) => ((k === 'time' || k === 'handshakeAt' || k === 'heardAt') && typeof v === 'string' ? new Date(Date.parse(v) + ms).toISOString() : v)) as Heartbeat;

describe("degradedCauses: each cause from its sample, against the settings and the heartbeat's own time", () => {
  it.each<[string, Heartbeat | undefined, Set<string> | undefined, string[]]>([
    ['no heartbeat: nothing to judge (readiness says NotReady)', undefined, undefined, []],
    ['disk 89% used, limit 90%', hb(disk(89)), undefined, []],
    ['disk 91% used, limit 90%', hb(disk(91)), undefined, ['disk_pressure']],
    ['failures of 2 services, limit 3', hb(), new Set(['d/a', 'd/b']), []],
    ['failures of 3 services, limit 3', hb(), new Set(['d/a', 'd/b', 'e/c']), ['repeated_failures']],
    ['every peer handshook a minute ago', hb(peers(60_000, 60_000)), undefined, []],
    ['1 of 2 peers stale: 50% is not more than 50%', hb(peers(60_000, 200_000)), undefined, []],
    ['2 of 3 peers without a handshake within 3m', hb(peers(60_000, 200_000, undefined)), undefined, ['overlay_unreachable']],
    ['no overlay reported (an agent without --overlay)', hb(), undefined, []],
    ['peers added a minute ago, no handshake yet: they have until the max age', hb({ overlay: { peers: [{ node: 'p0', since: ago(60_000) }, { node: 'p1', since: ago(60_000) }] } }), undefined, []],
    ['peers added 4 minutes ago that never handshook', hb({ overlay: { peers: [{ node: 'p0', since: ago(240_000) }, { node: 'p1', since: ago(240_000) }] } }), undefined, ['overlay_unreachable']],
    ['all three at once', hb({ ...disk(99), ...peers(undefined) }), new Set(['d/a', 'd/b', 'd/c']), ['disk_pressure', 'repeated_failures', 'overlay_unreachable']],
  ])('%s', (_name, h, failing, causes) => {
    expect(degradedCauses(h, failing, S).map((c) => c.cause)).toEqual(causes);
  });

  it('details say how far past the limit, and the settings move the limits', () => {
    expect(degradedCauses(hb(disk(95)), undefined, S)[0]!.detail).toBe('/var/lib/docker is 95% full (5Gi of 110Gi free; limit 90%)');
    expect(degradedCauses(hb(disk(95)), undefined, { ...S, diskPressurePercent: 96 })).toEqual([]);
    expect(degradedCauses(hb(peers(20_000)), undefined, { ...S, overlayHandshakeMaxAgeMs: 10_000 })[0]!.detail).toBe('1 of 1 WireGuard peers unreachable (neither heard nor handshake within 10s: p0); limit 50%');
  });

  it("a handshake ages into unreachable on the agent's own clock: as of the heartbeat that carries it", () => {
    const h = hb(peers(0));
    expect(degradedCauses(h, undefined, S)).toEqual([]);
    expect(degradedCauses(later(h, 181_000), undefined, S).map((c) => c.cause)).toEqual(['overlay_unreachable']);
  });

  it("a node whose clock is 10 minutes off is judged as one in step: the reader's clock is never compared (issue 29)", () => {
    for (const off of [-600_000, 600_000]) {
      expect(degradedCauses(skewed(hb(peers(60_000, 60_000)), off), undefined, S)).toEqual([]);
      expect(degradedCauses(skewed(hb(peers(60_000, 200_000, undefined)), off), undefined, S).map((c) => c.cause)).toEqual(['overlay_unreachable']);
    }
  });

  it('a peer heard recently (its keepalives arrive) is reachable though its handshake is old', () => {
    const h = hb({ overlay: { peers: [{ node: 'p0', handshakeAt: ago(170_000), heardAt: ago(5000) }] } });
    expect(degradedCauses(h, undefined, { ...S, overlayHandshakeMaxAgeMs: 30_000 })).toEqual([]);
    expect(degradedCauses(later(h, 30_000), undefined, { ...S, overlayHandshakeMaxAgeMs: 30_000 }).map((c) => c.cause)).toEqual(['overlay_unreachable']);
  });

  it('a link cut one way: the node hears its peers, they do not hear it — their reports count', () => {
    const self = hb(peers(1000, 1000));
    const peerSees = (node: string, heardAgo: number): Heartbeat => ({ ...hb(), spec: { ...hb().spec, node, overlay: { peers: [{ node: 'a', handshakeAt: ago(heardAgo) }] } } });
    const reports = unreachableReports([self, peerSees('p0', 200_000), peerSees('p1', 200_000)], S);
    expect(reports.get('a')).toEqual(new Set(['p0', 'p1']));
    expect(degradedCauses(self, undefined, S)).toEqual([]);
    expect(degradedCauses(self, undefined, S, reports.get('a')).map((c) => c.cause)).toEqual(['overlay_unreachable']);
    // One peer of two complaining is not more than half.
    expect(degradedCauses(self, undefined, S, unreachableReports([peerSees('p0', 200_000), peerSees('p1', 1000)], S).get('a'))).toEqual([]);
  });

  it('an operator trusting the node keeps the causes shown and lets placements in', () => {
    const node = (trusted: boolean) => ({ apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name: 'a' }, spec: { trusted } }) as never;
    const untrusted = nodeCondition(node(false), hb(disk(99)), undefined, S);
    expect(degradedBecause(untrusted)).toMatch(/^degraded: disk_pressure — .*\(jaco node trust overrides\)$/);
    expect(degradedText(untrusted)).toBe('Degraded');
    const trusted = nodeCondition(node(true), hb(disk(99)), undefined, S);
    expect(degradedBecause(trusted)).toBeUndefined();
    expect(degradedText(trusted)).toBe('Degraded(trusted)');
    expect(degradedText(nodeCondition(node(false), hb(disk(10)), undefined, S))).toBeUndefined();
  });
});

describe('failingServicesOf: restarts within the window, by node, as distinct services', () => {
  const cmd = (replica: string, restarts: number, at?: number): { value: ReplicaCommand } => ({
    value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: replica }, spec: { replica, op: 'restart', seq: 1, issuedAt: ago(0), reason: 'x' }, status: { restarts, generation: 1, ...(at === undefined ? {} : { lastRestartAt: ago(at) }) } },
  });
  const services = (r: string) => ({ 'd-a-0': 'd/a', 'd-a-1': 'd/a', 'd-b-0': 'd/b' })[r];
  it('counts services, not replicas; old restarts and cleared counters are out', () => {
    const m = failingServicesOf(
      [
        ['commands/n1/d-a-0', cmd('d-a-0', 2, 1000)],
        ['commands/n1/d-a-1', cmd('d-a-1', 1, 1000)],
        ['commands/n1/d-b-0', cmd('d-b-0', 1, 11 * 60_000)],
        ['commands/n2/d-b-0', cmd('d-b-0', 0, 1000)],
        ['commands/n2/gone-x-0', cmd('gone-x-0', 1, 1000)],
      ],
      services,
      10 * 60_000,
      NOW,
    );
    expect(m).toEqual(new Map([['n1', new Set(['d/a'])], ['n2', new Set(['gone-x-0'])]]));
  });
});

describe('restartCountsAgainstNode: what counts as a failure of the node', () => {
  const st = (restarts: number, at: number | undefined, cause?: string) => ({ restarts, generation: 1, ...(at === undefined ? {} : { lastRestartAt: ago(at) }), ...(cause === undefined ? {} : { lastRestartCause: cause }) });
  it.each<[string, ReturnType<typeof st> | undefined, boolean]>([
    ['no bookkeeping', undefined, false],
    ['ready again (counter cleared)', st(0, undefined), false],
    ['exited a minute ago', st(1, 60_000, 'exited'), true],
    ['health check failing', st(2, 60_000, 'degraded'), true],
    ['could not be started', st(1, 60_000, 'failed'), true],
    ['exited 11 minutes ago: out of the 10m window', st(1, 11 * 60_000, 'exited'), false],
    ['its container removed outside jaco (docker rm, jaco down)', st(1, 60_000, 'removed'), false],
    ['its container paused outside jaco', st(1, 60_000, 'paused'), false],
    ['removed after failing: the last restart was not the node’s', st(2, 60_000, 'removed'), false],
    ['a record older than causes: counts, as it always did', st(1, 60_000), true],
    ['a cause a newer release adds: counts', st(1, 60_000, 'something_new'), true],
  ])('%s → %s', (_name, status, counts) => {
    expect(restartCountsAgainstNode(status, 10 * 60_000, NOW)).toBe(counts);
  });

  it('after jaco down and up, restarts of removed containers do not degrade the node; real failures of the same services do', () => {
    const services = (r: string) => r.slice(0, 3);
    const on = (cause: string) => failingServicesOf(['d/a-0', 'd/b-0', 'd/c-0'].map((r) => [`commands/n1/${r}`, { value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: r }, spec: { replica: r, op: 'restart', seq: 1, issuedAt: ago(0), reason: 'x' }, status: { restarts: 1, lastRestartAt: ago(1000), lastRestartCause: cause, generation: 1 } } as ReplicaCommand }] as const), services, S.failureWindowMs, NOW);
    expect(degradedCauses(hb(), on('removed').get('n1'), S)).toEqual([]);
    expect(degradedCauses(hb(), on('exited').get('n1'), S).map((c) => c.cause)).toEqual(['repeated_failures']);
  });
});

describe('resolveNodeSettings: defaults, and an error naming the field', () => {
  it.each<[string, object, string | Partial<typeof S>]>([
    ['nothing set: the defaults', {}, {}],
    ['a default disk of 1Gi', { defaultInstanceEphemeralDisk: '1Gi' }, { defaultDiskBytes: Gi }],
    ['durations', { failureWindow: '5m', overlayHandshakeMaxAge: '30s' }, { failureWindowMs: 300_000, overlayHandshakeMaxAgeMs: 30_000 }],
    ['a percentage over 100', { diskPressurePercent: 120 }, 'diskPressurePercent: 120 is not a percentage in (0, 100]'],
    ['not a duration', { failureWindow: 'soon' }, 'failureWindow: invalid duration "soon"'],
    ['zero services', { failureServices: 0 }, 'failureServices: 0 is not a whole number ≥ 1'],
  ])('%s', (_name, spec, want) => {
    if (typeof want === 'string') expect(() => resolveNodeSettings(spec)).toThrow(new NodeSettingsError(want));
    else expect(resolveNodeSettings(spec)).toEqual({ ...S, ...want });
  });
});

describe("conditionLines: describe node's overlay line", () => {
  const node = { apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name: 'a' }, spec: {} } as unknown as Parameters<typeof conditionLines>[0];
  const overlayLine = (h: Heartbeat) => conditionLines(node, h, undefined, S).find((l) => l.startsWith('Overlay:'));
  it.each<[string, Heartbeat, string | undefined]>([
    ['no overlay reported: no line', hb(), undefined],
    ['an overlay without peers yet says why, not "0 of 0"', hb({ overlay: { peers: [] } }), 'Overlay:      no peers yet (nodes are joined once they have subnets: the first cluster-network service gives them)'],
    ['peers: how many reachable, and each late one with its ages', hb(peers(60_000, 200_000)), 'Overlay:      1 of 2 peers reachable; unreachable: p1 (handshake 3m20s ago)'],
  ])('%s', (_name, h, want) => expect(overlayLine(h)).toBe(want));
});
