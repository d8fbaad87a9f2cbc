// Since when each node was last seen Ready, as a revision: the newest heartbeat put with Docker up
// this cache received. Liveness is the lease (api/nodes.ts), so a lapse is a heartbeat that is
// gone, and two lapses look alike — absent both times. A Ready heartbeat written between them (a
// node that came back and lapsed again before any pass looked) is remembered here, so a clock of
// NotReady started on the first lapse is not carried over to the second (scheduler trackNotReady).
import type { Heartbeat } from '../api/types.js';
import type { IndexDef } from './cache.js';

/** By host: the mod revision of the newest Ready heartbeat this cache received (absent: none). */
export type LastReady = Map<string, number>;

export const LAST_READY: IndexDef<LastReady> = {
  name: 'last-ready',
  sources: ['heartbeats'],
  build(cache) {
    const hbs = cache.kind<Heartbeat>('heartbeats');
    const out: LastReady = new Map();
    for (const v of hbs.items.values()) if (v.value.spec.dockerUp) out.set(hbs.rest(v.key), v.modRevision);
    return out;
  },
  apply(index, changes, cache) {
    const hbs = cache.kind<Heartbeat>('heartbeats');
    for (const c of changes) {
      const v = c.value as { value: Heartbeat; modRevision: number } | undefined;
      if (c.type === 'put' && v?.value.spec.dockerUp) index.set(hbs.rest(c.key), v.modRevision);
    }
  },
};
