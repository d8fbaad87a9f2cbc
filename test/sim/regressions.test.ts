// Seeds that found bugs, replayed on their own (they also run in the 2,000 of sim.test.ts): each
// names what it found and where the fix and its table test are.
//   seed 1, 6, 7 — the drain started and abandoned moves without an audit record (controllers/drain/
//                  decide.ts; drain tables: "drain_move_started", "drain_move_abandoned")
//   seed 26      — a watch that lost the update of a key that was not the newest left a cache stale
//                  for good: the consistency check compared only count and newest revision
//                  (src/store/reflector.ts missedSince; src/store/reflector.test.ts, and
//                  test/integration/runtime-informer.test.ts on a real etcd)
//   seed 10737   — the scheduler re-placed a replica off a node whose heartbeat never lapsed: its
//                  cache lagged 8 s, longer than the 3 s grace, and showed the heartbeat aged
//                  (controllers/scheduler/node-loss.ts lossGuard: a re-placement compares the
//                  heartbeat key it judged; decide.test.ts "node lost")
//   seed 10857   — a deployment deleted and re-created while an agent still reported the old
//                  containers: the counter had been cleaned up, ids were reused, the new replica was
//                  matched to the old container, and its rollout reported complete over it
//                  (controllers/scheduler/bookkeeping.ts: a counter outlives its service while any
//                  replica of it is desired or reported; decide.test.ts "keeps its counter")
//   seed 11639   — no convergence after an aborted rollout: the deployment had been deleted and
//                  re-created (its generations numbered afresh) while replicas of the old one stayed;
//                  the rollout from their revision 2 aborted and "reverted" to the new incarnation's
//                  revision 2 record, another spec than the one they ran (controllers/rollout/
//                  decide.ts fromTemplate: a revision record is used only when its spec hash is the
//                  plan's fromHash, else the template of a replica still at it)
//   seed 55069, 61211 — a replica re-placed 0.1 s into a node's lapse: the scheduler's NotReady clock
//                  was kept by node name, so a node that came back unseen (no pass, or a cache that
//                  missed its heartbeat) and lapsed again was judged from the first lapse's clock
//                  (controllers/scheduler/node-loss.ts trackNotReady: a clock follows the heartbeat
//                  revision it judged; decide.test.ts "node lost")
//   seed 66901, 69100 — a rollout completed over a replica its cache never received (the placement's
//                  event lost): the scheduler had placed it at the previous spec (controllers/
//                  rollout/evidence.ts: a completion compares the service's counter, and the
//                  heartbeat of each node whose old container it excused; decide.test.ts "a
//                  completion compares ...")
//   seed 60348   — the invariant itself: a node 0.4 s into its lapse counted as Ready, the lapse
//                  record being refreshed only at the end of a step (test/sim/world.ts
//                  readyThroughout: Ready now, and no lapse within 30 s)
//
// The breadth variant's seeds (sim-breadth.test.ts: global and stateful services, forced drains):
//   seed 265     — a stateful replica reported node_lost off a node whose heartbeat never lapsed:
//                  the scheduler's cache lagged and the status act that reports it compared
//                  nothing (controllers/scheduler/bookkeeping.ts: the first report compares the
//                  evidence of loss, node-loss.ts lossGuard; node-loss.test.ts)
//   seed 4453    — a forced drain completed while its node's agent still reported the container of
//                  the replica it had stopped, removed by a scale-down between the decision and
//                  its commit (controllers/drain/decide.ts keptCopies: a completion compares the
//                  desired keys of the copies it leaves on the node; drain tables "seed 4453")
//   seed 30302   — a rollout completed while a drain's move, decided from the same state, landed
//                  first: its destination brought into view an old container left on that node
//                  by an earlier re-placement (controllers/rollout/evidence.ts: a completion
//                  compares the service's disruption ledger, which every move start writes;
//                  rollout tables "seed 30302")
//   seed 26425   — a deployment deleted and re-created before a pass saw the deletion: its first
//                  rollout (from the replicas the previous incarnation left) aborted with nothing
//                  left to revert to, so the current spec serves — the liveness check wrongly
//                  expected the plan's fromHash. The check now asks what the rollout does: revert
//                  only to a spec with a revision record or a replica still at it. Beside it, a
//                  real defect of the same ground: a plan of the previous incarnation governed the
//                  new one (RolloutPlanSpec.incarnation, serving.ts planOfIncarnation; rollout
//                  table "previous incarnation")
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimClock } from './clock.js';
import { Sim } from './world.js';

const timers = new SimClock();

describe('simulation seeds that found bugs', () => {
  beforeAll(() => timers.install());
  afterAll(() => timers.uninstall());

  it.each([1, 6, 7, 26, 10737, 10857, 11639, 55069, 60348, 61211, 66901, 69100])('seed %i: invariants hold and the cluster converges', async (seed) => {
    const sim = new Sim(seed, { nodes: 4, steps: 550, quietSteps: 300 }, timers);
    await sim.run();
    expect(sim.quietMs).toBeGreaterThan(0);
  });

  it.each([265, 4453, 30302, 26425])('breadth seed %i: invariants hold and the cluster converges', async (seed) => {
    const sim = new Sim(seed, { nodes: 4, steps: 550, quietSteps: 300, breadth: true }, timers);
    await sim.run();
    expect(sim.quietMs).toBeGreaterThan(0);
  });
});
