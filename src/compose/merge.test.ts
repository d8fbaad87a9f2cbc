// The merge rules as a table: one row per rule of the Specification's merge.md (and compose-go's
// uniqueness keys), base and override in, merged service out.
import { describe, expect, it } from 'vitest';
import { mergeAt, Override, Reset, settle, unique } from './merge.js';

const merged = (base: unknown, over: unknown) => unique(settle(mergeAt(['services', 's'], base, over)), ['services', 's']);

describe('merge rules (a service laid over another)', () => {
  it.each([
    ['a mapping merges key by key', { image: 'a', user: 'u' }, { image: 'b' }, { image: 'b', user: 'u' }],
    ['a sequence appends', { dns: ['1.1.1.1'] }, { dns: ['8.8.8.8'] }, { dns: ['1.1.1.1', '8.8.8.8'] }],
    ['command is replaced', { command: ['a', 'b'] }, { command: ['c'] }, { command: ['c'] }],
    ['entrypoint is replaced', { entrypoint: 'sh' }, { entrypoint: ['bash'] }, { entrypoint: ['bash'] }],
    ['healthcheck.test is replaced, the rest merged', { healthcheck: { test: ['CMD', 'a'], retries: 2 } }, { healthcheck: { test: ['CMD', 'b'] } }, { healthcheck: { test: ['CMD', 'b'], retries: 2 } }],
    ['environment merges by key, list and mapping alike', { environment: ['A=1', 'B=2'] }, { environment: { B: '3' } }, { environment: { A: '1', B: '3' } }],
    ['environment lists keep one entry per key', { environment: ['A=1', 'B=2'] }, { environment: ['A=9'] }, { environment: ['A=9', 'B=2'] }],
    ['a bare KEY is KEY: null', { environment: ['A'] }, { environment: { B: 'x' } }, { environment: { A: null, B: 'x' } }],
    ['extra_hosts merge by host', { extra_hosts: ['db:10.0.0.1'] }, { extra_hosts: { db: '10.0.0.2' } }, { extra_hosts: { db: '10.0.0.2' } }],
    ['ports: one per host ip, published, target and protocol', { ports: ['8080:80', '53:53/udp'] }, { ports: [{ target: 80, published: '8080' }, '53:53'] }, { ports: [{ target: 80, published: '8080' }, '53:53/udp', '53:53'] }],
    ['volumes: one per target, the later where the earlier stood', { volumes: ['./a:/data', 'logs:/logs'] }, { volumes: [{ type: 'volume', source: 'd', target: '/data' }] }, { volumes: [{ type: 'volume', source: 'd', target: '/data' }, 'logs:/logs'] }],
    ['secrets: one per target file', { secrets: ['s', { source: 't', target: '/x' }] }, { secrets: [{ source: 's', mode: 0o400 }] }, { secrets: [{ source: 's', mode: 0o400 }, { source: 't', target: '/x' }] }],
    ['depends_on merges by name, list and mapping alike', { depends_on: ['db'] }, { depends_on: { cache: { condition: 'service_healthy' } } }, { depends_on: { db: { condition: 'service_started' }, cache: { condition: 'service_healthy' } } }],
    ['networks merge by name', { networks: ['front'] }, { networks: { back: { aliases: ['b'] } } }, { networks: { front: null, back: { aliases: ['b'] } } }],
    ['a network’s aliases append, one of each', { networks: { n: { aliases: ['a'] } } }, { networks: { n: { aliases: ['a', 'b'] } } }, { networks: { n: { aliases: ['a', 'b'] } } }],
    ['build as a string is its context', { build: './app' }, { build: { target: 'prod' } }, { build: { context: './app', target: 'prod' } }],
    ['ulimits: a number replaces the soft/hard pair', { ulimits: { nofile: { soft: 1, hard: 2 } } }, { ulimits: { nofile: 5 } }, { ulimits: { nofile: 5 } }],
    ['an empty entry adds nothing', { image: 'a' }, { image: null }, { image: 'a' }],
    ['!reset removes a key', { ports: ['80'], image: 'a' }, { ports: new Reset() }, { image: 'a' }],
    ['!reset removes one key of a mapping', { environment: { A: '1', B: '2' } }, { environment: { A: new Reset() } }, { environment: { B: '2' } }],
    ['!override replaces instead of merging', { volumes: ['./a:/a'], environment: { A: '1' } }, { volumes: new Override(['./b:/b']), environment: new Override({ B: '2' }) }, { volumes: ['./b:/b'], environment: { B: '2' } }],
  ])('%s', (_what, base, over, want) => expect(merged(base, over)).toEqual(want));

  it('a !reset with nothing under it is dropped', () => expect(settle({ a: new Reset(), b: [1, new Reset()] })).toEqual({ b: [1] }));
});
