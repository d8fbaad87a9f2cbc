// The dashboard's actions (only with --allow-actions): each one calls the function its CLI command
// calls and says which command that is, so the operator learns the CLI from the page.
import { formatDuration } from '../api/units.js';
import { requestDrain } from '../app/drains.js';
import { setCordon, uncordon } from '../app/nodes.js';
import { requestAction, rollback } from '../app/rollouts.js';
import { CliError } from '../app/errors.js';
import type { Store } from '../store/store.js';
import type { Timings } from '../timings.js';
import type { ActionKind, ActionResult } from './wire.js';

interface ActionDef {
  /** What the target names. */
  target: 'node' | 'deployment' | 'service';
  cli(target: string, t: Timings): string;
  run(store: Store, target: string, t: Timings): Promise<string>;
}

/** DEPLOYMENT/SERVICE, as `jaco rollout pause` takes it. */
function service(target: string): { name: string; service: string } {
  const [name, svc, extra] = target.split('/');
  if (!name || !svc || extra !== undefined) throw new CliError(`invalid target ${JSON.stringify(target)}: use DEPLOYMENT/SERVICE`);
  return { name, service: svc };
}

const rolloutRequest = (verb: 'pause' | 'resume' | 'abort' | 'promote'): ActionDef => ({
  target: 'service',
  cli: (target) => `jaco rollout ${verb} ${target} --wait 0`,
  // --wait 0: the page shows the plan change as it streams in, so nothing waits here.
  run: async (store, target) => (await requestAction(store, service(target), verb, 0)).text,
});

export const ACTIONS: Record<ActionKind, ActionDef> = {
  cordon: { target: 'node', cli: (h) => `jaco node cordon ${h}`, run: async (s, h) => `node/${h} ${(await setCordon(s, h, true)) ? 'cordoned' : 'already cordoned'}\n` },
  uncordon: { target: 'node', cli: (h) => `jaco node uncordon ${h}`, run: (s, h) => uncordon(s, h) },
  drain: {
    target: 'node',
    cli: (h) => `jaco node drain ${h}`,
    run: async (s, h, t) => (await requestDrain(s, { host: h, timeout: formatDuration(t.drainTimeoutMs), force: false, remove: false })).message,
  },
  rollback: { target: 'deployment', cli: (d) => `jaco rollback ${d}`, run: (s, d) => rollback(s, d, undefined, false) },
  pause: rolloutRequest('pause'),
  resume: rolloutRequest('resume'),
  abort: rolloutRequest('abort'),
  promote: rolloutRequest('promote'),
};

export const isActionKind = (k: string): k is ActionKind => Object.hasOwn(ACTIONS, k);

const TARGET = /^[a-z0-9][a-z0-9.-]*(\/[a-z0-9][a-z0-9.-]*)?$/i;

/** Runs one action; a refusal (no such node, nothing to roll back) is a result, not a crash. */
export async function runAction(store: Store, kind: ActionKind, target: string, t: Timings): Promise<ActionResult> {
  const def = ACTIONS[kind];
  if (!TARGET.test(target)) return { ok: false, cli: '', text: `invalid target ${JSON.stringify(target)}` };
  const cli = def.cli(target, t);
  try {
    return { ok: true, cli, text: await def.run(store, target, t) };
  } catch (e) {
    if (e instanceof CliError) return { ok: false, cli, text: e.message };
    throw e;
  }
}
