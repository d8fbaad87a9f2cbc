import { describe, expect, it } from 'vitest';
import { keys } from '../api/keys.js';
import type { Heartbeat } from '../api/types.js';
import { MemoryStore } from '../../test/support/memory-store.js';
import { Cache } from './cache.js';

const T = Date.parse('2026-11-25T10:00:00Z');
const hb = (node: string, at: number, dockerUp = true): Heartbeat => ({ apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name: node }, spec: { node, time: new Date(at).toISOString(), intervalMs: 1000, agentVersion: 't', dockerUp } });

describe('routine changes (a heartbeat renewed on time wakes no controller)', () => {
  it.each<[string, (s: MemoryStore) => void, boolean]>([
    ['a renewal on time, Docker unchanged', (s) => s.put(keys.heartbeat('n1'), hb('n1', T + 1000)), true],
    ['a renewal after a gap (back from stale)', (s) => s.put(keys.heartbeat('n1'), hb('n1', T + 5000)), false],
    ['Docker went down', (s) => s.put(keys.heartbeat('n1'), hb('n1', T + 1000, false)), false],
    ['a new heartbeat key (a node claimed)', (s) => s.put(keys.heartbeat('n2'), hb('n2', T)), false],
    ['the key deleted (its lease expired)', (s) => s.remove(keys.heartbeat('n1')), false],
  ])('%s: routine %s', async (_name, change, routine) => {
    const store = new MemoryStore();
    store.put(keys.heartbeat('n1'), hb('n1', T));
    const cache = new Cache(store);
    await cache.start();
    const seen: [string[], string[]][] = [];
    cache.on('changed', (touched, quiet) => seen.push([[...touched], [...quiet]]));
    change(store);
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([[['heartbeats'], routine ? ['heartbeats'] : []]]);
    await cache.stop();
  });
});
