// jaco scale DEPLOYMENT/SERVICE=N …: a change of replica counts written the way apply writes any
// change (applyDeployments: a new revision, audited as deployment_applied, all in one transaction).
// The replica count is not part of a service's spec hash, so scaling never rolls running replicas.
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import type { Deployment, DeploymentSpec } from '../../api/types.js';
import type { Store } from '../../store/store.js';
import { applyDeployments, type ApplyOutcome } from '../../app/apply.js';
import { action, CliError, withStore } from '../common.js';

/** The most replicas a service may ask for (the Deployment schema's maximum). */
export const MAX_REPLICAS = 10_000;

export interface ScaleTarget {
  deployment: string;
  service: string;
  replicas: number;
}

/** Parses `DEPLOYMENT/SERVICE=N` (every argument; one service named twice is refused). */
export function parseScaleTargets(args: string[]): ScaleTarget[] {
  if (!args.length) throw new CliError('scale: name at least one DEPLOYMENT/SERVICE=N');
  const out: ScaleTarget[] = [];
  for (const a of args) {
    const m = /^([^/=\s]+)\/([^/=\s]+)=(.*)$/.exec(a);
    if (!m) throw new CliError(`scale: ${JSON.stringify(a)} is not DEPLOYMENT/SERVICE=N`);
    const [, deployment, service, count] = m as unknown as [string, string, string, string];
    const replicas = /^\d+$/.test(count) ? Number(count) : NaN;
    if (!Number.isInteger(replicas) || replicas > MAX_REPLICAS) throw new CliError(`scale: ${a}: the replica count must be a whole number from 0 to ${MAX_REPLICAS}`);
    if (out.some((t) => t.deployment === deployment && t.service === service)) throw new CliError(`scale: ${deployment}/${service} is named twice`);
    out.push({ deployment, service, replicas });
  }
  return out;
}

/**
 * The deployment specs after scaling (pure): refuses a deployment or service that is not there,
 * and a service placed globally (one replica per node: it has no count).
 */
export function scaledSpecs(current: ReadonlyMap<string, Deployment>, targets: ScaleTarget[]): Map<string, DeploymentSpec> {
  const out = new Map<string, DeploymentSpec>();
  for (const t of targets) {
    const dep = current.get(t.deployment);
    if (!dep) throw new CliError(`scale: deployment "${t.deployment}" not found (nothing was written)`);
    const spec = out.get(t.deployment) ?? dep.spec;
    const svc = spec.services[t.service];
    if (!svc) throw new CliError(`scale: deployment "${t.deployment}" has no service "${t.service}"; it has ${Object.keys(spec.services).sort().join(', ')} (nothing was written)`);
    if (svc.placement?.mode === 'global') throw new CliError(`scale: ${t.deployment}/${t.service} is placed globally (one replica per node): it has no replica count (nothing was written)`);
    out.set(t.deployment, { ...spec, services: { ...spec.services, [t.service]: { ...svc, replicas: t.replicas } } });
  }
  return out;
}

/** Scales, all targets in one transaction; resolves to one outcome per deployment touched. */
export async function scale(store: Store, targets: ScaleTarget[], opts: { dryRun?: boolean } = {}): Promise<ApplyOutcome[]> {
  const names = [...new Set(targets.map((t) => t.deployment))];
  const got = await Promise.all(names.map((n) => store.get<Deployment>(keys.deployment(n))));
  const current = new Map(got.flatMap((d) => (d ? [[d.value.metadata.name, d.value] as const] : [])));
  const specs = scaledSpecs(current, targets);
  const cause = `scale ${targets.map((t) => `${t.deployment}/${t.service}=${t.replicas}`).join(' ')}`;
  return applyDeployments(
    store,
    [...specs].map(([name, spec]) => {
      const meta = current.get(name)!.metadata;
      return { name, spec, cause, ...(meta.labels ? { labels: meta.labels } : {}), ...(meta.annotations ? { annotations: meta.annotations } : {}) };
    }),
    opts,
  );
}

export function registerScale(program: Command): void {
  program
    .command('scale')
    .description("Set services' replica counts: a new revision of each deployment, audited like apply (running replicas are not rolled)")
    .argument('<targets...>', 'DEPLOYMENT/SERVICE=N, one or more (all land together or none does)')
    .option('--dry-run', 'check and print what would change, write nothing')
    .addHelpText(
      'after',
      `
Examples:
  jaco scale shop/web=5
  jaco scale shop/web=0 shop/worker=2     # one transaction: both or neither

The new count is stored in the deployment's spec as \`jaco apply\` stores one (a new revision,
deployment_applied in the audit log, \`jaco rollback\` undoes it); the scheduler adds or removes
replicas from its next pass. A manifest applied later sets the count it names again.
`,
    )
    .action(
      action(async (args: string[], f: { dryRun?: boolean }, cmd: Command) => {
        const targets = parseScaleTargets(args);
        const outcomes = await withStore(cmd, (s) => scale(s, targets, { dryRun: !!f.dryRun }));
        const dry = f.dryRun ? ' (dry run)' : '';
        for (const o of outcomes) process.stdout.write(o.result === 'unchanged' ? `deployment/${o.name} unchanged${dry}\n` : `deployment/${o.name} scaled${dry} (revision ${o.revision}: ${o.summary})\n`);
      }),
    );
}
