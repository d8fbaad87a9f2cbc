// Guards on the etcd3 client's watch manager (etcd3 1.1.2, the latest release): every watch of a
// namespace shares one gRPC stream that the manager opens, reopens and routes responses on. Four of
// its paths go wrong under the faults jaco is built to survive; all four were found and are checked
// by test/integration/store-watch.test.ts, which cancels, reopens and cuts watches while etcd
// compacts and writes flow.
//
// - One stream ending is taken twice. A cut stream emits 'error' and then 'end'; the manager
//   reconnects on each. The second reconnect opens a second stream beside the first, both attach
//   every watcher, and etcd numbers each stream's watches from 0: watch 0 of one stream is routed to
//   watch 0 of the other (a watch saw another prefix's events), and the create responses of one
//   land in the other's queue ("Could not find watcher corresponding to create response", thrown).
//   Guard: a stream reports its end once, and nothing after it.
// - A response whose watch the manager no longer holds is thrown from the stream's data handler, an
//   uncaught error that ends the process. etcd answers a watch twice when it is compacted while it
//   is being cancelled: "canceled, compact_revision N" (taken as the answer to the cancel), then the
//   answer to the cancel itself (etcd keeps a compacted watch's id until it is cancelled). The
//   reflector meets it: a relist cancels every watch while etcd cancels those behind a compaction.
//   Guard: on one stream etcd never reuses an id, so such a response is a late answer: dropped.
// - A cancel() of a watch the manager already forgot (ended by compaction, its 'error' came first)
//   waits for an answer that may never come (with no other watch left the stream was closed).
//   Guard: it completes at once, and etcd is told to free the id if the stream is up.
// - etcd refuses a watch opened with a token older than the latest change of users or roles
//   ("revision of auth store is old"), which no unary call sees. Guard (for a store that logs in):
//   drop the token and reopen the stream, its watchers resumed on it from their revisions.
import type { EventEmitter } from 'node:events';
import { ClientRuntimeError, type IWatchResponse, type Namespace, type Watcher } from 'etcd3';
import { readerMetrics } from '../observability/reader-metrics.js';
import { oldAuthRevision } from './errors.js';

/** The manager's private parts the guards use (etcd3/lib/watch.js). */
interface WatchManagerInternals {
  state: number;
  watchers: Watcher[];
  client: { watch(): Promise<GrpcStream> };
  getStream(): GrpcStream;
  handleResponse(res: IWatchResponse): void;
  handleCancelResponse(watcher: Watcher, res: IWatchResponse): void;
  detach(watcher: Watcher): Promise<void>;
}

interface GrpcStream extends EventEmitter {
  write(req: { cancel_request: { watch_id: string } }): boolean;
  cancel(): void;
}

/** What etcd3's handleResponse throws for a response whose watch it does not hold. */
const UNKNOWN_WATCH = 'Failed to find watcher for IWatchResponse';

/** The manager's state with a stream up (etcd3's State.Connected). */
const CONNECTED = 2;

let dropped = 0;

/**
 * Watch responses dropped since the process began: late answers, and events after a stream's end
 * (also jaco_watch_responses_dropped_total, by reason, in a process that serves metrics).
 */
export function droppedWatchResponses(): number {
  return dropped;
}

function drop(reason: 'late_answer' | 'after_end'): void {
  dropped++;
  readerMetrics.droppedWatchResponses.inc({ reason });
}

/**
 * Guards the watch manager of `n` (one per namespace). `onAuthRefusal` drops the store's token: given
 * when the store logs in.
 */
export function guardWatches(n: Namespace, onAuthRefusal?: () => void): void {
  const wm = (n as unknown as { watchManager?: WatchManagerInternals }).watchManager;
  const parts = ['getStream', 'handleResponse', 'handleCancelResponse', 'detach'] as const;
  if (!wm || typeof wm.client?.watch !== 'function' || parts.some((p) => typeof wm[p] !== 'function')) {
    throw new Error('etcd3 watch manager has changed: src/store/watch-guard.ts no longer fits it');
  }

  const open = wm.client.watch.bind(wm.client);
  wm.client.watch = async () => {
    const stream = await open();
    const emit = stream.emit.bind(stream);
    let ended = false;
    stream.emit = (event: string | symbol, ...args: unknown[]): boolean => {
      if (event !== 'data' && event !== 'error' && event !== 'end') return emit(event, ...args);
      if (ended) {
        if (event === 'data') drop('after_end');
        return false;
      }
      if (event !== 'data') ended = true;
      return emit(event, ...args);
    };
    return stream;
  };

  // etcd3 looks the watch up itself and throws when it holds none; catching that one error spares
  // a second scan of every watcher per response (a hollow-nodes process holds 1,800 watches: ~12 µs
  // a scan). If etcd3 reworded it, the error would be thrown again and store-watch.test.ts fails.
  const handleResponse = wm.handleResponse.bind(wm);
  wm.handleResponse = (res) => {
    try {
      handleResponse(res);
    } catch (e) {
      if (!(e instanceof ClientRuntimeError) || !e.message.startsWith(UNKNOWN_WATCH)) throw e;
      drop('late_answer');
    }
  };

  const detach = wm.detach.bind(wm);
  wm.detach = (watcher) => {
    if (wm.watchers.includes(watcher)) return detach(watcher);
    if (wm.state === CONNECTED && wm.watchers.length && watcher.id !== null) wm.getStream().write({ cancel_request: { watch_id: watcher.id } });
    return Promise.resolve();
  };

  if (!onAuthRefusal) return;
  const handleCancelResponse = wm.handleCancelResponse.bind(wm);
  wm.handleCancelResponse = (watcher, res) => {
    handleCancelResponse(watcher, res);
    if (!oldAuthRevision({ message: res.cancel_reason ?? '' }) || wm.state !== CONNECTED) return;
    // The stream carries the token it was opened with: end it, and the manager opens it again.
    onAuthRefusal();
    wm.getStream().cancel();
  };
}
