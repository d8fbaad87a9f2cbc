// jaco rollout status|history|undo and jaco rollback: follow a rolling update, read a deployment's
// revision history, and re-apply an earlier revision as a new one (seed 001's `jaco rollback`).
import { withRestartDependents } from '../../api/spec.js';
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { rolloutProgress, type RolloutProgress } from '../../app/controllers.js';
import { yamlDiff } from '../../api/change.js';
import { keys } from '../../api/keys.js';
import type { Deployment, DeploymentRevision, DeploymentStatus, ReplicaDesired, ReplicaObserved, RolloutAction, RolloutPlan } from '../../api/types.js';
import { minReadyAt } from '../../api/readiness.js';
import { formatDuration } from '../../api/units.js';
import { logger } from '../../observability/log.js';
import { Cache } from '../../runtime/cache.js';
import { REPLICAS } from '../../runtime/replicas.js';
import type { Watchable } from '../../runtime/watchable.js';
import type { Store } from '../../store/store.js';
import { prepareImages } from '../images.js';
import { applyDeployments } from '../../app/apply.js';
import { EXIT_ROLLOUT_TIMEOUT, mustGetDeployment, requestAction, revisionsOf, rollback, targetServices } from '../../app/rollouts.js';
import { action, CliError, connect, deploymentArg, durationFlag, EXIT_INVALID, EXIT_OK, parseOutput, withStore } from '../common.js';
import { age, printObjects, printTable } from '../../app/output.js';

/** `jaco rollout status` exit codes: 0 rolled out, 1 aborted (or no such deployment), 2 etcd unreachable, 3 timed out. */
export const EXIT_ROLLOUT_ABORTED = EXIT_INVALID;
export { EXIT_ROLLOUT_TIMEOUT };

function parseRevision(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`invalid revision ${JSON.stringify(v)}: use a positive whole number`);
  return n;
}

// ---------------------------------------------------------------- rollout status

/** What rollout status follows: one cache over these prefixes, so every check reads one cut of the store. */
const ROLLOUT_STATUS_READS = ['deployments', 'statuses', 'rollouts', 'desired', 'observed'] as const satisfies readonly Watchable[];

/** The deployment's replica copies, each with what its agent reports (the replica index's join). */
function copiesOf(name: string, cache: Cache): { desired: ReplicaDesired; observed?: ReplicaObserved }[] {
  return [...cache.index(REPLICAS).byId.values()].filter((e) => e.deployment === name).flatMap((e) => e.copies);
}

function progressOf(name: string, cache: Cache): RolloutProgress {
  return rolloutProgress({
    deployment: cache.kind<Deployment>('deployments').items.get(keys.deployment(name))?.value,
    status: cache.kind<DeploymentStatus>('statuses').items.get(keys.deploymentStatus(name))?.value,
    plans: [...cache.kind<RolloutPlan>('rollouts').items.values()].map((v) => v.value).filter((p) => p.spec.deployment === name),
    replicas: copiesOf(name, cache),
    now: Date.now(),
  });
}

/**
 * When a replica of the deployment becomes ready by time alone (a service without a health check is
 * ready its minimum ready time after it started): no store event says so, so the follower wakes then.
 */
function nextReadyAt(name: string, cache: Cache, now: number): number | undefined {
  let next: number | undefined;
  for (const { desired, observed } of copiesOf(name, cache)) {
    const at = minReadyAt(desired, observed);
    if (at !== undefined && at > now && (next === undefined || at < next)) next = at;
  }
  return next;
}

/** Follows a deployment's rollout, printing each service's line when it changes; resolves to the exit code. */
/**
 * --timeout, from the command's start: resolves EXIT_ROLLOUT_TIMEOUT (saying so) once it passes,
 * so every step of the wait — the first reads of the cluster included — is bounded by it.
 */
function giveUpAfter(timeoutMs: number, name: string, out: NodeJS.WritableStream): { timedOut: Promise<number>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<number>((resolve) => {
    if (timeoutMs > 0)
      timer = setTimeout(() => {
        out.write(`timed out after ${formatDuration(timeoutMs)} waiting for deployment "${name}" to roll out\n`);
        resolve(EXIT_ROLLOUT_TIMEOUT);
      }, timeoutMs);
  });
  return { timedOut, cancel: () => clearTimeout(timer) };
}

async function followRollout(store: Store, name: string, timedOut: Promise<number>, out: NodeJS.WritableStream): Promise<number> {
  const cache = Cache.onStore(store, ROLLOUT_STATUS_READS, { log: logger('rollout-status') });
  let over = false;
  const followed = (async () => {
    await cache.start();
    if (over) return EXIT_ROLLOUT_TIMEOUT;
    return await new Promise<number>((resolve) => {
      const printed = new Map<string, string>();
      let wake: NodeJS.Timeout | undefined;
      const finish = (code: number) => {
        clearTimeout(wake);
        cache.off('changed', check);
        resolve(code);
      };
      void timedOut.then(finish);
      function check(): void {
        const p = progressOf(name, cache);
        if (p.phase === 'missing') {
          out.write(`deployment "${name}" not found (deleted?)\n`);
          return finish(EXIT_INVALID);
        }
        for (const l of p.lines) {
          if (printed.get(l.service) === l.text) continue;
          printed.set(l.service, l.text);
          out.write(`${l.service}: ${l.text}\n`);
        }
        if (p.phase === 'aborted') {
          out.write(
            p.unit
              ? `deployment "${name}" rollout to revision ${p.revision} aborted as one unit (spec.update.atomic): ${p.unit.service} failed (${p.unit.reason}); every service goes back to revision ${p.unit.fromRevision}\n`
              : `deployment "${name}" rollout to revision ${p.revision} aborted\n`,
          );
          return finish(EXIT_ROLLOUT_ABORTED);
        }
        if (p.phase === 'paused') {
          out.write(`deployment "${name}" rollout to revision ${p.revision} paused after a failure\n`);
          return finish(EXIT_ROLLOUT_ABORTED);
        }
        if (p.phase === 'complete') {
          out.write(`deployment "${name}" successfully rolled out (revision ${p.revision})\n`);
          return finish(EXIT_OK);
        }
        clearTimeout(wake);
        const now = Date.now();
        const at = nextReadyAt(name, cache, now);
        if (at !== undefined) wake = setTimeout(check, at - now + 10);
      }
      cache.on('changed', check);
      check();
    });
  })();
  try {
    return await Promise.race([timedOut, followed]);
  } finally {
    over = true;
    await cache.stop();
  }
}

// ---------------------------------------------------------------- rollout history

function historyTable(revisions: DeploymentRevision[], current: number, now: number): void {
  printTable(
    ['REVISION', 'APPLIED', 'AGE', 'CAUSE', 'SUMMARY'],
    revisions.map((r) => [`${r.spec.revision}${r.spec.revision === current ? ' (current)' : ''}`, r.spec.appliedAt, age(r.spec.appliedAt, now), r.spec.cause, r.spec.summary]),
  );
}

function revisionDetail(name: string, revisions: DeploymentRevision[], n: number, current: number): string {
  const rec = revisions.find((r) => r.spec.revision === n);
  if (!rec) throw new CliError(`revision ${n} of deployment "${name}" is not stored; stored: ${revisions.map((r) => r.spec.revision).join(', ') || 'none'}`);
  const prev = revisions.filter((r) => r.spec.revision < n).pop();
  let out = `deployment/${name} revision ${n}${n === current ? ' (current)' : ''}\n`;
  out += `Applied:  ${rec.spec.appliedAt}\nCause:    ${rec.spec.cause}\nSummary:  ${rec.spec.summary || '<none>'}\n\nSpec:\n`;
  out += stringify(rec.spec.template, { lineWidth: 0 }).trimEnd().replace(/^/gm, '  ') + '\n';
  if (!prev) return out + `\nNo earlier revision is stored to compare with.\n`;
  const diff = yamlDiff(`deployment/${name}`, prev.spec.template, rec.spec.template, { from: `revision ${prev.spec.revision}`, to: `revision ${n}` });
  return out + `\nChanges from revision ${prev.spec.revision}:\n${diff || '  (none: the same spec)\n'}`;
}

// ---------------------------------------------------------------- pause, resume, abort, restart

/** DEPLOYMENT or DEPLOYMENT/SERVICE. */
function parseTarget(v: string): { name: string; service?: string } {
  const [name, service, extra] = deploymentArg(v).split('/');
  if (!name || extra !== undefined || service === '') throw new CliError(`invalid target ${JSON.stringify(v)}: use DEPLOYMENT or DEPLOYMENT/SERVICE`);
  return service ? { name, service } : { name };
}

/** A new revision with the same spec that replaces every replica of the service(s) (kubectl rollout restart). */
async function restart(store: Store, target: { name: string; service?: string }): Promise<string> {
  const cur = await mustGetDeployment(store, target.name);
  // A service that restarts with one of them (dependsOn restart: true) restarts too, after it.
  const services = withRestartDependents(cur.value.spec, targetServices(cur, target));
  // A restarted service with pullPolicy always runs its tag's current digest (docs/images.md).
  const items = await prepareImages(
    store,
    [{ name: target.name, spec: cur.value.spec, labels: cur.value.metadata.labels, annotations: cur.value.metadata.annotations, cause: `restart ${services.join(', ')}`, restart: services }],
    { select: (_d, s) => services.includes(s) && cur.value.spec.services[s]?.pullPolicy === 'always' },
  );
  const [o] = await applyDeployments(store, items);
  return `deployment/${target.name} restarted (revision ${o!.revision}: ${o!.summary}); follow it with: jaco rollout status ${target.name}\n`;
}

// ---------------------------------------------------------------- commands

export function registerRollout(program: Command): void {
  const rollout = program.command('rollout').description('Follow, pause, resume, abort, promote and restart rolling updates; read revision history (see also: jaco rollback)');

  const requestHelp = (action: RolloutAction, what: string) =>
    `\n${what}\n` +
    '\nWith DEPLOYMENT alone, every service of the deployment whose rollout the request applies to.\n' +
    'The request is written on the rollout plan (rollouts/<deployment>/<service>); the rollout\n' +
    'controller carries it out, audits it and clears it. The command waits for that (--wait).\n' +
    '\nExit codes: 0 done, 1 nothing to ' + action + ' (or no such deployment/service), 2 etcd unreachable,\n' +
    '            3 no controller took the request within --wait (it stays on the plan).\n';
  for (const [verb, description, what, example] of [
    ['pause', 'Pause a rollout in progress: no new step starts; steps in flight finish', 'A paused rollout keeps its place; `jaco rollout resume` goes on, `jaco rollout abort` reverts,\na new apply starts a new rollout. The progress deadline does not count while paused.', 'jaco rollout pause app/web'],
    ['resume', 'Resume a paused rollout (paused by an operator or by failureAction: pause)', 'Steps start again where the rollout stopped; a step that failed before the pause stays failed\n(its replica is left to the scheduler’s restarts).', 'jaco rollout resume app'],
    ['abort', 'Abort a rollout in progress or paused and revert every replica to the previous revision', 'The revert goes step by step under the same disruption budget; the previous revision keeps\nserving new replicas until the next apply (failure reason operator_abort). A rollout still in\nits canary phase loses its canaries (the scheduler scales them away); no other replica moved.', 'jaco rollout abort app/web'],
    ['promote', 'Promote a rollout’s canaries (update.canary): the rolling update of the other replicas goes on', 'With update.canary: N a rollout first starts N extra replicas at the new spec beside the old\nones and waits. promote lets it step the old replicas (the canaries stay until it completes, then\nthe scheduler scales them away); abort removes the canaries instead. update.autoPromote promotes\nby itself once every canary has stayed ready that long.', 'jaco rollout promote app/web'],
  ] as const)
    rollout
      .command(verb)
      .description(description)
      .argument('<target>', 'DEPLOYMENT or DEPLOYMENT/SERVICE')
      .option('--wait <duration>', 'how long to wait for the controller to carry it out (0: do not wait)', '30s')
      .addHelpText('after', requestHelp(verb, what) + `\nExamples:\n  ${example}\n  ${example} --wait 0\n`)
      .action(
        action(async (t: string, opts: { wait: string }, cmd: Command) => {
          const target = parseTarget(t);
          const waitMs = durationFlag('--wait', opts.wait, { zero: 'not to wait' });
          const r = await withStore(cmd, (store) => requestAction(store, target, verb, waitMs));
          process.stdout.write(r.text);
          return r.code;
        }),
      );

  rollout
    .command('restart')
    .description('Replace every replica of a deployment (or of one service) at the same spec, as a rolling update')
    .argument('<target>', 'DEPLOYMENT or DEPLOYMENT/SERVICE')
    .addHelpText(
      'after',
      '\nLike kubectl rollout restart: a new revision (cause "restart <services>") with the same spec; the\n' +
        'rollout controller rolls every replica of the named services onto it under the service’s update\n' +
        'block (parallelism, maxUnavailable, delay, monitor, failureAction). Containers are recreated,\n' +
        'the spec hash does not change, and a later apply of the same manifest changes nothing. Services\n' +
        'that restart with a restarted one (dependsOn restart: true) are restarted too, after it.\n' +
        '\nExamples:\n  jaco rollout restart app/web && jaco rollout status app\n  jaco rollout restart app\n',
    )
    .action(
      action(async (t: string, _opts: unknown, cmd: Command) => {
        const target = parseTarget(t);
        process.stdout.write(await withStore(cmd, (store) => restart(store, target)));
      }),
    );

  rollout
    .command('status')
    .description('Follow a deployment’s rolling update line by line until it completes, aborts or times out')
    .argument('<deployment>', 'deployment name', deploymentArg)
    .option('--timeout <duration>', 'give up after this long (0: wait for ever)', '5m')
    .addHelpText(
      'after',
      '\nExit codes: 0 rolled out (every service completed or needed no rollout, every replica ready),\n' +
        '            1 the rollout aborted (or the deployment does not exist), 2 etcd unreachable, 3 timed out.\n' +
        '\nExamples:\n  jaco apply -f app.yaml && jaco rollout status app --timeout 10m\n  jaco rollout status app --timeout 0\n',
    )
    .action(
      action(async (name: string, opts: { timeout: string }, cmd: Command) => {
        const timeoutMs = durationFlag('--timeout', opts.timeout, { zero: 'to wait for ever' });
        const { timedOut, cancel } = giveUpAfter(timeoutMs, name, process.stdout);
        const store = await connect(cmd);
        try {
          const follow = async () => {
            await mustGetDeployment(store, name);
            return await followRollout(store, name, timedOut, process.stdout);
          };
          const code = await Promise.race([timedOut, follow()]);
          // Timed out: a read it gave up on may still be pending (until its own deadline); the answer is given, so end now.
          if (code === EXIT_ROLLOUT_TIMEOUT) setTimeout(() => process.exit(code), 500).unref();
          return code;
        } catch (e) {
          throw store.unreachable(e);
        } finally {
          cancel();
          store.close();
        }
      }),
    );

  rollout
    .command('history')
    .description('List a deployment’s stored revisions, or show one revision’s spec and its diff to the previous one')
    .argument('<deployment>', 'deployment name', deploymentArg)
    .option('--revision <n>', 'show this revision in full', parseRevision)
    .option('-o, --output <format>', 'yaml or json (the revision records)')
    .addHelpText('after', '\nThe CLI keeps the last 10 revisions of each deployment.\n\nExamples:\n  jaco rollout history app\n  jaco rollout history app --revision 3\n')
    .action(
      action(async (name: string, opts: { revision?: number; output?: string }, cmd: Command) => {
        const out = parseOutput(opts.output, ['table', 'yaml', 'json']);
        await withStore(cmd, async (store) => {
          const cur = await mustGetDeployment(store, name);
          const revisions = await revisionsOf(store, name);
          const current = cur.value.metadata.generation ?? 1;
          if (out !== 'table') {
            const picked = opts.revision === undefined ? revisions : revisions.filter((r) => r.spec.revision === opts.revision);
            if (opts.revision !== undefined && !picked.length) throw new CliError(`revision ${opts.revision} of deployment "${name}" is not stored`);
            return printObjects(out, picked, opts.revision !== undefined);
          }
          if (opts.revision !== undefined) process.stdout.write(revisionDetail(name, revisions, opts.revision, current));
          else historyTable(revisions, current, Date.now());
        });
      }),
    );

  const rollbackAction = action(async (name: string, opts: { toRevision?: number; dryRun?: boolean }, cmd: Command) => {
    const text = await withStore(cmd, (store) => rollback(store, name, opts.toRevision, !!opts.dryRun));
    process.stdout.write(text);
  });
  const rollbackHelp =
    '\nThe stored spec of revision N is applied as a NEW revision (cause "rollback to revision N"), which\n' +
    'the rollout controller rolls out like any apply; an in-progress rollout is superseded.\n' +
    '\nExamples:\n  jaco rollback app\n  jaco rollback app --to-revision 3\n  jaco rollout history app   # to pick a revision\n';
  for (const [parent, cmdName] of [
    [program, 'rollback'],
    [rollout, 'undo'],
  ] as const)
    parent
      .command(cmdName)
      .description('Roll a deployment back to an earlier revision (default: the one before the current)')
      .argument('<deployment>', 'deployment name', deploymentArg)
      .option('--to-revision <n>', 'the revision whose spec to re-apply', parseRevision)
      .option('--dry-run', 'show what would be applied, write nothing')
      .addHelpText('after', rollbackHelp)
      .action(rollbackAction);
}
