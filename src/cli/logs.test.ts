import { describe, expect, it } from 'vitest';
import type { ReplicaDesired, ReplicaObserved } from '../api/types.js';
import { formatLine, LineSplitter, logSources, mergeByTime, parseLogTarget, parseSince, parseTail, splitTimestamp, timeKey, trimLines } from './logs.js';
import { execNode } from './commands/exec.js';

const NOW = Date.parse('2026-11-27T12:00:00Z');

describe('targets, --since and --tail', () => {
  const deployments = new Set(['shop', 'web']);
  it.each([
    ['shop', { kind: 'deployment', deployment: 'shop' }],
    ['shop/web', { kind: 'deployment', deployment: 'shop', service: 'web' }],
    ['shop-web-1', { kind: 'replica', replica: 'shop-web-1' }],
    // A deployment's name wins over a replica of the same name.
    ['web', { kind: 'deployment', deployment: 'web' }],
  ])('%s', (arg, want) => expect(parseLogTarget(arg, deployments)).toEqual(want));
  it.each(['shop/', '/web', 'a/b/c'])('refuses %s', (arg) => expect(() => parseLogTarget(arg, deployments)).toThrow(/name DEPLOYMENT, DEPLOYMENT\/SERVICE or a REPLICA/));

  it.each([
    ['10m', NOW / 1000 - 600],
    ['1h30m', NOW / 1000 - 5400],
    ['45s', NOW / 1000 - 45],
    ['2026-11-27T10:00:00Z', Date.parse('2026-11-27T10:00:00Z') / 1000],
    ['2026-11-27T10:00:00.5+01:00', Date.parse('2026-11-27T09:00:00.5Z') / 1000],
  ])('--since %s', (v, want) => expect(parseSince(v, NOW)).toBe(want));
  it.each(['0s', 'ten minutes', '10', '-5m', '2026-13-45T00:00:00Z'])('--since refuses %s', (v) => expect(() => parseSince(v, NOW)).toThrow(/--since/));

  it.each([
    [undefined, undefined],
    ['all', undefined],
    ['0', 0],
    ['100', 100],
  ])('--tail %s', (v, want) => expect(parseTail(v)).toBe(want));
  it.each(['-1', '1.5', 'x'])('--tail refuses %s', (v) => expect(() => parseTail(v)).toThrow(/--tail/));
});

describe('lines', () => {
  it('cuts chunks into lines; a partial line waits for the rest or the end', () => {
    const s = new LineSplitter();
    expect(s.push('a\nb')).toEqual(['a']);
    expect(s.push('c\n\nd')).toEqual(['bc', '']);
    expect(s.end()).toEqual(['d']);
    expect(s.end()).toEqual([]);
  });

  it.each([
    ['2026-11-27T10:00:00.123456789Z hello world', { time: '2026-11-27T10:00:00.123456789Z', text: 'hello world', stream: 'stdout' }],
    ['2026-11-27T10:00:00Z ', { time: '2026-11-27T10:00:00Z', text: '', stream: 'stdout' }],
    ['2026-11-27T10:00:00.1Z with CR\r', { time: '2026-11-27T10:00:00.1Z', text: 'with CR', stream: 'stdout' }],
    ['no time here', { time: '', text: 'no time here', stream: 'stdout' }],
  ])('splits %j', (line, want) => expect(splitTimestamp(line)).toEqual(want));

  it('orders Docker times whose trailing zeros were trimmed', () => {
    expect(timeKey('2026-11-27T10:00:00.1Z') > timeKey('2026-11-27T10:00:00.09Z')).toBe(true);
    expect(timeKey('2026-11-27T10:00:00Z') < timeKey('2026-11-27T10:00:00.000000001Z')).toBe(true);
  });

  it('merges replicas by time, keeping each replica\'s own order (ties: the order given)', () => {
    const l = (time: string, text: string) => ({ time: `2026-11-27T10:00:${time}Z`, text, stream: 'stdout' as const });
    const a = { name: 'a', lines: [l('01.5', 'a1'), l('03', 'a2'), l('03', 'a3')] };
    const b = { name: 'b', lines: [l('01.25', 'b1'), l('03', 'b2'), l('04', 'b3')] };
    expect(mergeByTime([a, b]).map((x) => `${x.source.name}:${x.line.text}`)).toEqual(['b:b1', 'a:a1', 'a:a2', 'a:a3', 'b:b2', 'b:b3']);
  });

  it.each([
    [undefined, undefined, ['o1', 'e1', 'o2', 'e2']],
    [undefined, 3, ['e1', 'o2', 'e2']],
    [undefined, 0, []],
    [Date.parse('2026-11-27T10:00:02Z') / 1000, undefined, ['o2', 'e2']],
    [Date.parse('2026-11-27T10:00:02Z') / 1000, 1, ['e2']],
  ])('--since %s --tail %s on kept lines (time order, both streams counted)', (since, tail, want) => {
    const l = (t: string, text: string, stream: 'stdout' | 'stderr') => ({ time: `2026-11-27T10:00:0${t}Z`, text, stream });
    // As a demultiplexer hands them over: stdout's first, then stderr's.
    const lines = [l('1', 'o1', 'stdout'), l('2.5', 'o2', 'stdout'), l('1.5', 'e1', 'stderr'), l('3', 'e2', 'stderr')];
    expect(trimLines(lines, since, tail).map((x) => x.text)).toEqual(want);
  });

  it.each([
    [{ prefix: 'shop-web-1@node-1', width: 20 }, 'shop-web-1@node-1    | hello\n'],
    [{ prefix: 'x@n', width: 0, timestamps: true }, 'x@n | 2026-11-27T10:00:00Z hello\n'],
    [{}, 'hello\n'],
    [{ timestamps: true }, '2026-11-27T10:00:00Z hello\n'],
  ])('formats with %j', (opts, want) => expect(formatLine({ time: '2026-11-27T10:00:00Z', text: 'hello', stream: 'stdout' }, opts)).toBe(want));
});

describe('which copies', () => {
  const d = (replica: string, node: string, service = 'web', extra: Partial<ReplicaDesired['spec']> = {}) =>
    ({ spec: { replica, node, deployment: 'shop', service, ...extra } }) as ReplicaDesired;
  const o = (replica: string, node: string, state: string, containerId?: string) => [`${node}/${replica}`, { status: { replica, node, state, ...(containerId ? { containerId } : {}) } }] as [string, ReplicaObserved];
  // shop-web-1 is moving node-1 → node-2 (the destination carries the move marker).
  const desired = [d('shop-web-1', 'node-2', 'web', { move: { id: 'm', from: 'node-1', by: 'drain', startedAt: '', deadline: '' } }), d('shop-web-1', 'node-1'), d('shop-db-0', 'node-1', 'db'), d('shop-web-2', 'node-3')];
  const observed = new Map([o('shop-web-1', 'node-1', 'running', 'c1'), o('shop-web-1', 'node-2', 'running', 'c2'), o('shop-db-0', 'node-1', 'running', 'c3'), o('shop-web-2', 'node-3', 'starting')]);

  it('a service: every copy, by replica then node, with the container its node reports', () => {
    expect(logSources({ kind: 'deployment', deployment: 'shop', service: 'web' }, desired, observed)).toEqual([
      { replica: 'shop-web-1', node: 'node-1', container: 'c1' },
      { replica: 'shop-web-1', node: 'node-2', container: 'c2' },
      { replica: 'shop-web-2', node: 'node-3' },
    ]);
    expect(logSources({ kind: 'deployment', deployment: 'shop' }, desired, observed)).toHaveLength(4);
    expect(logSources({ kind: 'replica', replica: 'shop-db-0' }, desired, observed)).toEqual([{ replica: 'shop-db-0', node: 'node-1', container: 'c3' }]);
  });

  it('exec goes to the copy that stays during a move, else the one running, else the only one', () => {
    expect(execNode('shop-web-1', desired, observed)).toBe('node-2');
    expect(execNode('shop-db-0', desired, observed)).toBe('node-1');
    expect(execNode('shop-web-2', desired, observed)).toBe('node-3');
    expect(() => execNode('shop-web-9', desired, observed)).toThrow('replica "shop-web-9" not found (jaco get replicas lists them)');
  });
});
