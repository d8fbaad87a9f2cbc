import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allocatorEnv, JEMALLOC, runningAllocator } from './allocator.js';

const root = mkdtempSync(join(tmpdir(), 'jaco-alloc-'));
const withLib = join(root, 'multiarch');
const without = join(root, 'empty');
mkdirSync(withLib);
mkdirSync(without);
writeFileSync(join(withLib, JEMALLOC), '');

describe('allocatorEnv: jemalloc for the controllers where it is installed', () => {
  it.each<[string, NodeJS.ProcessEnv, string[], Record<string, string>]>([
    ['installed: preloaded by name, its background thread on', {}, [without, withLib], { LD_PRELOAD: JEMALLOC, MALLOC_CONF: 'background_thread:true' }],
    ['installed, the operator tuned it: their MALLOC_CONF kept', { MALLOC_CONF: 'dirty_decay_ms:1000' }, [withLib], { LD_PRELOAD: JEMALLOC, MALLOC_CONF: 'dirty_decay_ms:1000' }],
    ['not installed: glibc with two arenas', {}, [without], { MALLOC_ARENA_MAX: '2' }],
    ['not installed, the operator set the arenas: kept', { MALLOC_ARENA_MAX: '4' }, [without], { MALLOC_ARENA_MAX: '4' }],
    ['the operator preloads something already: nothing added', { LD_PRELOAD: 'libtcmalloc.so.4' }, [withLib], {}],
  ])('%s', (_n, env, dirs, want) => expect(allocatorEnv(env, dirs)).toEqual(want));
});

describe('runningAllocator', () => {
  it.each<[string, string | undefined, string]>([
    ['jemalloc mapped', `7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/${JEMALLOC}\n`, 'jemalloc'],
    ['glibc only', '7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n', 'glibc'],
    ['no map to read', undefined, 'unknown'],
  ])('%s', (_n, maps, want) => {
    const file = join(root, `maps-${want}`);
    if (maps !== undefined) writeFileSync(file, maps);
    expect(runningAllocator(file)).toBe(want);
  });
});
