// What the operator's tools read from the controllers: the pure read models a command or the
// dashboard shows (a drain's and a rollout's progress, the rebalancer's pressure formula and its
// settings, a placed replica's footprint, a move's size, how many previous lines an agent keeps). src/cli and src/dashboard never import
// controllers/ themselves (controllers/structure.test.ts): this list, and app/processes.ts for
// what runs a controller process, is the whole of what they rely on.
export { drainProgress, drainSummary, type DrainProgress } from '../../controllers/drain/progress.js';
export { rolloutProgress, type Progress as RolloutProgress } from '../../controllers/rollout/progress.js';
export { composite, fold, readingOf, type NodeEwma } from '../../controllers/rebalancer/pressure.js';
export { defaultConfig as rebalancerConfig } from '../../controllers/rebalancer/config.js';
export { placedReplicaOf } from '../../controllers/placement/input.js';
export { moveStartBytes } from '../../controllers/moves/move.js';
export { PREVIOUS_LINES } from '../../controllers/node-agent/previous-logs.js';
