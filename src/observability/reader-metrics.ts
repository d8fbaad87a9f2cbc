// The counts the store's readers keep (src/store/reflector.ts, src/store/watch-guard.ts), without
// prom-client: a CLI process that reads and exits never loads it (50–100 ms of CPU per command,
// docs/benchmarks.md).
// A process that serves metrics imports metrics.ts, which points these at its registry's metrics;
// until then (and in a CLI) they count nothing.

export interface LabelledCounter {
  inc(labels: Record<string, string>): void;
}
export interface LabelledGauge {
  set(labels: Record<string, string>, value: number): void;
}

const uncounted: LabelledCounter = { inc: () => undefined };
const unset: LabelledGauge = { set: () => undefined };

export const readerMetrics = {
  malformedKeys: uncounted,
  unreadableKeys: unset,
  prunedFields: uncounted,
  informerInconsistencies: uncounted,
  informerRelists: uncounted,
  storeReplaced: uncounted,
  droppedWatchResponses: uncounted,
};
