// jaco rebalance plan: what the rebalancer sees and would do, without moving anything. It asks the
// leader (GET /rebalance/plan on the metrics address its election key advertises) and, when no
// leader answers, recomputes the plan from the store and says so.
import type { Command } from 'commander';
import { currentPlan, renderPlan } from '../../app/rebalance-plan.js';
import { action, parseOutput, timingsOf, withStore } from '../common.js';
import { toJson } from '../../app/output.js';

export function registerRebalance(program: Command): void {
  const rebalance = program.command('rebalance').description('Explain the pressure-based rebalancer (always on; it has no knobs)');
  rebalance
    .command('plan')
    .description("Show each node's EWMA pressure, which gates hold, every candidate's verdict and the move the rebalancer would make, without moving anything")
    .option('-o, --output <format>', 'json')
    .option('--from-store', 'do not ask the leader: recompute from the store (EWMAs seeded from the latest samples)')
    .option('--timeout <ms>', 'how long to wait for the leader', (v) => Number(v), 3000)
    .addHelpText(
      'after',
      `
The plan comes from the rebalancer leader's current state (its EWMAs, consecutive-cycle counters and
cooldowns), fetched from the metrics address in its election key. When no leader answers, it is
recomputed from the store and the output says what was assumed.

Examples:
  jaco rebalance plan
  jaco rebalance plan -o json | jq '.plan.gates'
  jaco rebalance plan --from-store
  jaco audit -f --type rebalance_moved,rebalance_skipped   # what the rebalancer did and skipped
`,
    )
    .action(
      action(async (opts: { output?: string; fromStore?: boolean; timeout: number }, cmd: Command) => {
        const out = parseOutput(opts.output, ['table', 'json']);
        const report = await withStore(cmd, (store) => currentPlan(store, timingsOf(cmd), { timeoutMs: opts.timeout, fromStore: opts.fromStore }));
        process.stdout.write(out === 'json' ? toJson(report) : renderPlan(report));
      }),
    );
}
