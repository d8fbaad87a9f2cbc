// What the CLI's `jaco rollout pause|resume|abort|promote` and `jaco rollback` do, and the
// dashboard's actions of the same names call: a request written on a service's rollout plan for
// the rollout controller to carry out, and an earlier revision applied again as a new one.
import { keys } from '../api/keys.js';
import { REQUEST_APPLIES_TO } from '../api/reasons/rollout.js';
import type { Deployment, DeploymentRevision, RolloutAction, RolloutPlan, RolloutPlanSpec } from '../api/types.js';
import { formatDuration } from '../api/units.js';
import type { Store, Versioned } from '../store/store.js';
import { commitActs } from '../store/writer.js';
import { applyDeployments } from './apply.js';
import { CliError } from './errors.js';
import { EXIT_OK } from './exit-codes.js';
import { readKey, readPrefix, unreadableRefusal, warnUnreadable } from './read.js';

/** A request no rollout controller took within the wait (`jaco rollout status` uses it for its timeout too). */
export const EXIT_ROLLOUT_TIMEOUT = 3;

export async function revisionsOf(store: Store, name: string): Promise<DeploymentRevision[]> {
  const { items, unreadable } = await readPrefix<DeploymentRevision>(store, { prefix: keys.revisions(name), kind: 'DeploymentRevision' });
  warnUnreadable(unreadable);
  return items.map((i) => i.value).sort((a, b) => a.spec.revision - b.spec.revision);
}

export async function mustGetDeployment(store: Store, name: string): Promise<Versioned<Deployment>> {
  const { value: d, unreadable } = await readKey<Deployment>(store, keys.deployment(name), 'Deployment');
  if (unreadable) throw new CliError(unreadableRefusal(unreadable, `use deployment "${name}"`));
  if (!d) throw new CliError(`deployment "${name}" not found`);
  return d;
}

/** A service's rollout plan; one that cannot be read is named and treated as none. */
export async function rolloutPlanOf(store: Store, name: string, service: string): Promise<Versioned<RolloutPlan> | undefined> {
  const { value, unreadable } = await readKey<RolloutPlan>(store, keys.rollout(name, service), 'RolloutPlan');
  if (unreadable) warnUnreadable([unreadable]);
  return value;
}

// ---------------------------------------------------------------- rollback

export async function rollback(store: Store, name: string, toRevision: number | undefined, dryRun: boolean): Promise<string> {
  const cur = await mustGetDeployment(store, name);
  const current = cur.value.metadata.generation ?? 1;
  const revisions = await revisionsOf(store, name);
  const n = toRevision ?? revisions.filter((r) => r.spec.revision < current).pop()?.spec.revision;
  if (n === undefined) throw new CliError(`deployment "${name}" has no stored revision before ${current} to roll back to`);
  const rec = revisions.find((r) => r.spec.revision === n);
  if (!rec) throw new CliError(`revision ${n} of deployment "${name}" is not stored; stored: ${revisions.map((r) => r.spec.revision).join(', ')}`);
  const [o] = await applyDeployments(
    store,
    [{ name, spec: rec.spec.template, labels: cur.value.metadata.labels, annotations: cur.value.metadata.annotations, cause: `rollback to revision ${n}` }],
    { dryRun },
  );
  if (o!.result === 'unchanged') return `deployment/${name} skipped rollback: revision ${current} already has the spec of revision ${n}\n`;
  return `deployment/${name} rolled back to revision ${n}${dryRun ? ' (dry run)' : ''} (now revision ${o!.revision}: ${o!.summary})\n`;
}

// ---------------------------------------------------------------- requests on a rollout plan

/** The services a target names: the one given (it must exist), or every service of the deployment. */
export function targetServices(dep: Versioned<Deployment>, target: { name: string; service?: string }): string[] {
  if (target.service && !dep.value.spec.services[target.service]) throw new CliError(`deployment "${target.name}" has no service "${target.service}"`);
  return target.service ? [target.service] : Object.keys(dep.value.spec.services).sort();
}

/** Whether the controller carried a request out (it clears one that does not apply, with a note). */
const DONE: Record<RolloutAction, (p: RolloutPlanSpec) => boolean> = {
  pause: (p) => p.state === 'paused',
  resume: (p) => p.state !== 'paused',
  abort: (p) => p.state === 'aborted',
  promote: (p) => !!p.canary?.promotedAt,
};

/** Whether a request makes sense on this plan (the controller would only clear it with a note otherwise). */
const applies = (action: RolloutAction, p: RolloutPlanSpec) => REQUEST_APPLIES_TO[action].includes(p.state) && (action !== 'promote' || (!!p.canary && !p.canary.promotedAt));

/**
 * Writes the request on each matching plan (compare-and-swap; the rollout controller carries it
 * out and clears it), then waits up to `waitMs` for the controller to take it. Returns the lines to
 * print and the exit code.
 */
export async function requestAction(store: Store, target: { name: string; service?: string }, action: RolloutAction, waitMs: number): Promise<{ text: string; code: number }> {
  const services = targetServices(await mustGetDeployment(store, target.name), target);
  const requested: string[] = [];
  for (const service of services) {
    for (let attempt = 0; ; attempt++) {
      const cur = await rolloutPlanOf(store, target.name, service);
      if (!cur || !applies(action, cur.value.spec)) break;
      const value: RolloutPlan = { ...cur.value, spec: { ...cur.value.spec, request: { action, requestedAt: new Date().toISOString() } } };
      const r = await commitActs(store, [{ label: `rollout ${action} ${target.name}/${service}`, ops: [{ op: 'update', key: cur.key, value, modRevision: cur.modRevision }] }]);
      if (r.committed.length) {
        requested.push(service);
        break;
      }
      // The controller wrote the plan in between: read it again.
      if (attempt >= 10) throw new CliError(`rollout of ${target.name}/${service} keeps changing; try again`);
    }
  }
  if (!requested.length) {
    const which = target.service ? `${target.name}/${target.service}` : `deployment "${target.name}"`;
    const none = { resume: 'none is paused', promote: 'no rollout has canaries waiting', pause: 'none is in progress', abort: 'none is in progress' }[action];
    throw new CliError(`${which} has no rollout to ${action} (${none}); see jaco rollout status ${target.name}`);
  }
  let text = requested.map((svc) => `${target.name}/${svc}: ${action} requested\n`).join('');
  const deadline = Date.now() + waitMs;
  const pending = new Set(requested);
  while (waitMs > 0 && pending.size) {
    for (const svc of [...pending]) {
      const p = (await rolloutPlanOf(store, target.name, svc))?.value.spec;
      if (!p || p.request) continue;
      pending.delete(svc);
      const done = DONE[action](p);
      text += `${target.name}/${svc}: ${done ? pastTense(action) : `not ${pastTense(action)}`} (rollout to revision ${p.toRevision} ${p.state}${p.failureReason ? `: ${p.failureReason}` : ''}, step ${p.currentStep} of ${p.totalSteps})\n`;
    }
    if (!pending.size || Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  // Not waited for (--wait 0, the dashboard's way: its page shows the plan change as it comes):
  // requested is all there is to say.
  if (pending.size && waitMs > 0) return { text: text + `no rollout controller took the request for ${[...pending].join(', ')} within ${formatDuration(waitMs)}; it stays on the plan (is \`jaco controller rollout\` running?)\n`, code: EXIT_ROLLOUT_TIMEOUT };
  return { text, code: EXIT_OK };
}

const pastTense = (a: RolloutAction) => ({ pause: 'paused', resume: 'resumed', abort: 'aborted', promote: 'promoted' })[a];

