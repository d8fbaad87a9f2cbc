// jaco rollout status|history|undo and jaco rollback: follow a rolling update, read a deployment's
// revision history, and re-apply an earlier revision as a new one (seed 001's `jaco rollback`).
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { rolloutProgress, type Progress } from '../../../controllers/rollout/progress.js';
import { yamlDiff } from '../../api/change.js';
import { keys } from '../../api/keys.js';
import type { Deployment, DeploymentRevision, DeploymentStatus, ReplicaDesired, ReplicaObserved, RolloutPlan } from '../../api/types.js';
import { durationMs, formatDuration } from '../../api/units.js';
import { logger } from '../../observability/log.js';
import { Informer } from '../../store/informer.js';
import type { Store, Versioned } from '../../store/store.js';
import { applyDeployments } from '../apply.js';
import { action, CliError, connect, EXIT_INVALID, EXIT_OK, parseOutput, withStore } from '../common.js';
import { age, printObjects, printTable } from '../output.js';

/** `jaco rollout status` exit codes: 0 rolled out, 1 aborted (or no such deployment), 2 etcd unreachable, 3 timed out. */
export const EXIT_ROLLOUT_ABORTED = EXIT_INVALID;
export const EXIT_ROLLOUT_TIMEOUT = 3;

async function revisionsOf(store: Store, name: string): Promise<DeploymentRevision[]> {
  const { items } = await store.list<DeploymentRevision>(keys.revisions(name));
  return items.map((i) => i.value).sort((a, b) => a.spec.revision - b.spec.revision);
}

async function mustGetDeployment(store: Store, name: string): Promise<Versioned<Deployment>> {
  const d = await store.get<Deployment>(keys.deployment(name));
  if (!d) throw new CliError(`deployment "${name}" not found`);
  return d;
}

function parseRevision(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`invalid revision ${JSON.stringify(v)}: use a positive whole number`);
  return n;
}

// ---------------------------------------------------------------- rollout status

interface StatusSources {
  deployments: Informer<Deployment>;
  statuses: Informer<DeploymentStatus>;
  plans: Informer<RolloutPlan>;
  desired: Informer<ReplicaDesired>;
  observed: Informer<ReplicaObserved>;
}

function progressOf(name: string, s: StatusSources): Progress {
  const replicas = [...s.desired.items.values()]
    .map((v) => v.value)
    .filter((d) => d.spec.deployment === name)
    .map((desired) => ({ desired, observed: s.observed.items.get(keys.observed(desired.spec.node, desired.spec.replica))?.value }));
  return rolloutProgress({
    deployment: s.deployments.items.get(keys.deployment(name))?.value,
    status: s.statuses.items.get(keys.deploymentStatus(name))?.value,
    plans: [...s.plans.items.values()].map((v) => v.value),
    replicas,
    now: Date.now(),
  });
}

/** Follows a deployment's rollout, printing each service's line when it changes; resolves to the exit code. */
async function followRollout(store: Store, name: string, timeoutMs: number, out: NodeJS.WritableStream): Promise<number> {
  const log = logger('rollout-status');
  const sources: StatusSources = {
    deployments: new Informer<Deployment>(store, keys.deployments(), { kind: 'Deployment', log }),
    statuses: new Informer<DeploymentStatus>(store, keys.deploymentStatuses(), { kind: 'DeploymentStatus', log }),
    plans: new Informer<RolloutPlan>(store, keys.rollouts(name), { kind: 'RolloutPlan', log }),
    desired: new Informer<ReplicaDesired>(store, keys.desiredOf(), { kind: 'ReplicaDesired', log }),
    observed: new Informer<ReplicaObserved>(store, keys.observedOf(), { kind: 'ReplicaObserved', log }),
  };
  const all = Object.values(sources) as Informer<unknown>[];
  try {
    await Promise.all(all.map((i) => i.start()));
    return await new Promise<number>((resolve) => {
      const printed = new Map<string, string>();
      let timer: NodeJS.Timeout | undefined;
      const finish = (code: number) => {
        clearTimeout(timer);
        for (const i of all) i.removeListener('change', check);
        resolve(code);
      };
      function check(): void {
        const p = progressOf(name, sources);
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
          out.write(`deployment "${name}" rollout to revision ${p.revision} aborted\n`);
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
      }
      for (const i of all) i.on('change', check);
      if (timeoutMs > 0)
        timer = setTimeout(() => {
          out.write(`timed out after ${formatDuration(timeoutMs)} waiting for deployment "${name}" to roll out\n`);
          finish(EXIT_ROLLOUT_TIMEOUT);
        }, timeoutMs);
      check();
    });
  } finally {
    await Promise.all(all.map((i) => i.stop()));
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

// ---------------------------------------------------------------- rollback

async function rollback(store: Store, name: string, toRevision: number | undefined, dryRun: boolean): Promise<string> {
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

// ---------------------------------------------------------------- commands

export function registerRollout(program: Command): void {
  const rollout = program.command('rollout').description('Follow rolling updates and read revision history (see also: jaco rollback)');

  rollout
    .command('status')
    .description('Follow a deployment’s rolling update line by line until it completes, aborts or times out')
    .argument('<deployment>', 'deployment name')
    .option('--timeout <duration>', 'give up after this long (0: wait for ever)', '5m')
    .addHelpText(
      'after',
      '\nExit codes: 0 rolled out (every service completed or needed no rollout, every replica ready),\n' +
        '            1 the rollout aborted (or the deployment does not exist), 2 etcd unreachable, 3 timed out.\n' +
        '\nExamples:\n  jaco apply -f app.yaml && jaco rollout status app --timeout 10m\n  jaco rollout status app --timeout 0\n',
    )
    .action(
      action(async (name: string, opts: { timeout: string }, cmd: Command) => {
        let timeoutMs: number;
        try {
          timeoutMs = durationMs(opts.timeout);
        } catch {
          throw new CliError(`invalid --timeout ${JSON.stringify(opts.timeout)}: use a duration such as 90s, 5m or 0`);
        }
        const store = await connect(cmd);
        try {
          await mustGetDeployment(store, name);
          return await followRollout(store, name, timeoutMs, process.stdout);
        } catch (e) {
          throw store.unreachable(e);
        } finally {
          store.close();
        }
      }),
    );

  rollout
    .command('history')
    .description('List a deployment’s stored revisions, or show one revision’s spec and its diff to the previous one')
    .argument('<deployment>', 'deployment name')
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
      .argument('<deployment>', 'deployment name')
      .option('--to-revision <n>', 'the revision whose spec to re-apply', parseRevision)
      .option('--dry-run', 'show what would be applied, write nothing')
      .addHelpText('after', rollbackHelp)
      .action(rollbackAction);
}
