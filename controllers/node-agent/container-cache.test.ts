// The container cache under racing reads: a slow read never overwrites a newer one, and a
// destroyed container is not brought back by a resync that listed it before it went.
import { describe, expect, it } from 'vitest';
import { ContainerCache } from './container-cache.js';
import type { ContainerFacts } from './facts.js';

const f = (id: string, state: ContainerFacts['state'] = 'running') => ({ id, state }) as ContainerFacts;

describe('ContainerCache', () => {
  it('keeps the newest read', () => {
    const c = new ContainerCache();
    const slow = c.begin();
    const fast = c.begin();
    expect(c.put(f('a', 'exited'), fast)).toBe(true);
    expect(c.put(f('a', 'running'), slow)).toBe(false);
    expect(c.get('a')?.state).toBe('exited');
  });

  it('a container destroyed during a resync stays gone', () => {
    const c = new ContainerCache();
    c.put(f('a'), c.begin());
    const resync = c.begin();
    c.remove('a'); // destroy event while the resync was listing
    expect(c.put(f('a'), resync)).toBe(false);
    c.sweep(new Set(['a']), resync);
    expect(c.get('a')).toBeUndefined();
  });

  it('a sweep drops containers the list did not find, but not ones added after it began', () => {
    const c = new ContainerCache();
    c.put(f('old'), c.begin());
    const resync = c.begin();
    c.put(f('new'), c.begin()); // a start worker inspected its new container meanwhile
    c.sweep(new Set(), resync);
    expect(c.values().map((x) => x.id)).toEqual(['new']);
    expect(c.size).toBe(1);
  });
});
