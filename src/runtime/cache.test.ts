import { describe, expect, it } from 'vitest';
import type { Store } from '../store/store.js';
import { logger } from '../observability/log.js';
import type { Reflector } from '../store/reflector.js';
import { Cache } from './cache.js';

// Checked before anything touches the store: a store that is never called is enough.
const store = {} as Store;
const log = logger('test');

describe('how a cache is told to hold its sources', () => {
  it('refuses a source spec for a source nothing reads (it would be dropped silently)', () => {
    expect(() => Cache.onStore(store, ['desired'], { log, specs: { registries: { prefix: 'registries/', kind: 'Registry' } } })).toThrow(/how to hold registries, which nothing reads/);
  });

  it('refuses a watch under which it holds nothing', () => {
    expect(() => Cache.onStore(store, ['desired'], { log, watch: ['desired/node-1/', 'registries/'] })).toThrow(/watch registries\/, under which it holds nothing/);
  });

  it('takes a spec and a watch of a source it holds', () => {
    expect(() => Cache.onStore(store, ['desired', 'registries'], { log, specs: { desired: { prefix: 'desired/node-1/', kind: 'ReplicaDesired' } }, watch: ['desired/node-1/', 'registries/'] })).not.toThrow();
  });

  it('watches each source on its own prefix when told `each` (a process under RBAC reads nothing between them)', () => {
    const cache = Cache.onStore(store, ['desired', 'registries', 'network'], { log, specs: { desired: { prefix: 'desired/node-1/', kind: 'ReplicaDesired' } }, watch: 'each' });
    expect((cache.feed as Reflector).watched.sort()).toEqual(['config/network', 'desired/node-1/', 'registries/']);
  });
});
