// jaco apply / delete / diff: declarative deployment management from manifests.
import type { Command } from 'commander';
import { yamlDiff } from '../../api/change.js';
import { keys } from '../../api/keys.js';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { formatProblem, ManifestError, parseManifests, readSources, type ManifestProblem } from '../../api/manifest.js';
import { composeFilesIn, composeFileVariable, composeModel, composeSource, isComposeText, loadCompose } from '../../compose/load.js';
import { parseEnvFile } from '../../compose/interpolate.js';
import type { Deployment } from '../../api/types.js';
import { withDependencyHashes } from '../../api/spec.js';
import { applyDeployments, deleteDeployments, type ApplyItem } from '../../app/apply.js';
import { prepareImages } from '../images.js';
import { pinToStore } from '../../app/apply-files.js';
import { placementPreview } from '../../app/placement-preview.js';
import { action, CliError, typeSlashName, withStore } from '../common.js';
import { readKey, warnUnreadable } from '../../app/read.js';

/** How apply, diff, delete and convert read compose files. */
interface ComposeFlags {
  name?: string;
  envFile?: string[];
  profile?: string[];
  strict?: boolean;
  allowPrivileged?: boolean;
}

/**
 * -f as given; without it, what docker compose reads with none: the files COMPOSE_FILE names
 * (from the environment, else the working directory's .env), else the working directory's
 * compose file and its override file.
 */
export function inputFiles(files: string[] | undefined, env: Readonly<Record<string, string | undefined>> = process.env, cwd = process.cwd()): string[] {
  if (files?.length) return files;
  const named = composeFileVariable(env.COMPOSE_FILE ? env : { ...dotEnv(cwd), ...env });
  if (named) return named;
  if (composeFilesIn(cwd).length) return [cwd];
  throw new CliError('no manifest given: use -f FILE, -f DIR or -f - (stdin), set COMPOSE_FILE, or run it in a directory holding compose.yaml');
}

/** The COMPOSE_* variables of the working directory's .env (docker compose reads them there too). */
function dotEnv(cwd: string): Record<string, string> {
  try {
    return Object.fromEntries([...parseEnvFile(readFileSync(join(cwd, '.env'), 'utf8'))].filter(([k]) => k.startsWith('COMPOSE_')));
  } catch {
    return {};
  }
}

/** What -f names: jaco manifests and compose files alike; every problem of every file at once. */
function readInputs(given: string[] | undefined, flags: ComposeFlags): { items: ApplyItem[]; deployments: Deployment[] } {
  const files = inputFiles(given);
  // A directory holding a compose file means that file and its override file (as `docker compose` reads it).
  const found = new Set(files.flatMap((f) => (f !== '-' && isDirectory(f) ? composeFilesIn(f) : [])));
  const sources = readSources(withComposeFiles(files));
  // An override file found beside a compose file is one even when it says no services (volumes: only).
  const compose = sources.filter((s) => found.has(s.name) || isComposeText(s.text));
  const manifests = sources.filter((s) => !compose.includes(s));
  const problems: ManifestProblem[] = [];
  const deployments: Deployment[] = [];
  const items: ApplyItem[] = [];
  // Several compose files are one application, merged in order (docker compose -f a -f b).
  if (compose.length) {
    try {
      const app = loadCompose(compose.map((s) => composeSource(s.name, s.text)), { name: flags.name, envFiles: flags.envFile, profiles: flags.profile, strict: flags.strict, allowPrivileged: flags.allowPrivileged });
      for (const w of app.warnings) process.stderr.write(`warning: ${formatProblem(w)}\n`);
      deployments.push(app.deployment);
      items.push({ name: app.deployment.metadata.name, spec: app.deployment.spec, annotations: app.deployment.metadata.annotations, cause: 'apply', source: compose.map((s) => s.name).join(' + '), ...(app.objects.length ? { objects: app.objects } : {}) });
    } catch (e) {
      if (!(e instanceof ManifestError)) throw e;
      problems.push(...e.problems);
    }
  }
  if (manifests.length) {
    try {
      for (const { object, file, document } of parseManifests(manifests, { kinds: ['Deployment'] })) {
        const d = object as Deployment;
        deployments.push(d);
        items.push({ name: d.metadata.name, spec: d.spec, labels: d.metadata.labels, annotations: d.metadata.annotations, cause: 'apply', source: `${file} document ${document}` });
      }
    } catch (e) {
      if (!(e instanceof ManifestError)) throw e;
      problems.push(...e.problems);
    }
  }
  if (problems.length) throw new ManifestError(problems);
  // parseManifests refuses a name defined twice among manifests (with its line); what is left is a
  // compose application named like another compose application or like a manifest's deployment.
  const seen = new Map<string, string>();
  for (const i of items) {
    const first = seen.get(i.name);
    if (first) throw new CliError(`deployment/${i.name} is defined twice: in ${first} and in ${i.source}`);
    seen.set(i.name, i.source ?? '');
  }
  return { items, deployments };
}

/** -f as given, a directory holding a compose file replaced by it and its override file. */
function withComposeFiles(files: string[]): string[] {
  return files.flatMap((f) => (f !== '-' && isDirectory(f) && composeFilesIn(f).length ? composeFilesIn(f) : [f]));
}

const manifestItems = (files: string[] | undefined, flags: ComposeFlags) => readInputs(files, flags).items;

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The compose options every command that reads -f takes. */
function composeOptions(cmd: Command): Command {
  return cmd
    .option('--name <name>', 'compose files: the deployment name (default: the top-level name:, else the directory)')
    .option('--env-file <file>', 'compose files: variables for interpolation (default: the .env beside the file; repeatable)', collect)
    .option('--profile <profile>', 'compose files: enable services of this profile (repeatable; also COMPOSE_PROFILES)', collect)
    .option('--strict', 'compose files: every field jaco ignores is an error')
    .option('--allow-privileged', 'compose files: accept privileged: true, host ipc/pid and unconfined security_opt');
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

export function registerApply(program: Command): void {
  composeOptions(
    program
      .command('apply')
      .description('Create or update deployments from manifests or Docker Compose files (all-or-nothing: on any error nothing is written)')
      .option('-f, --filename <path>', 'manifest or compose file, directory (its compose.yaml and compose.override.yaml, else its *.yaml files), or - for stdin (repeatable; several compose files are one application, merged in order). Default: COMPOSE_FILE, else the current directory\'s compose file', collect)
      .option('--dry-run', 'validate and show what would change and where the scheduler would place new replicas now; write nothing (images are resolved, not built)')
      .option('--registry <host>', "where images built here (build:) are pushed when their image: names no registry (default: the cluster's, jaco registry default)"),
  )
    .addHelpText(
      'after',
      '\nEvery image is resolved to the digest every node will run (docs/images.md); build: sections are\nbuilt with your Docker engine and pushed first.\n\nExamples:\n  jaco apply -f examples/hello.yaml\n  jaco apply -f compose.yaml\n  jaco apply -f compose.yaml -f compose.prod.yaml\n  jaco apply -f ./myapp --env-file prod.env\n  jaco apply -f ./myapp --registry registry.example.com:5000\n  cat app.yaml | jaco apply -f -\n  cat compose.yaml | jaco apply -f - --name shop\n',
    )
    .action(
      action(async (opts: { filename?: string[]; dryRun?: boolean; registry?: string } & ComposeFlags, cmd: Command) => {
        const read = manifestItems(opts.filename, opts);
        const { outcomes, preview } = await withStore(cmd, async (store) => {
          const items = await prepareImages(store, read, { dryRun: opts.dryRun, registry: opts.registry });
          const outcomes = await applyDeployments(store, items, { dryRun: opts.dryRun, warn: (t) => process.stderr.write(t) });
          // A dry run also says what the scheduler would do with it (like nomad job plan).
          return { outcomes, preview: opts.dryRun ? await placementPreview(store, items) : [] };
        });
        for (const o of outcomes) {
          const rev = o.result === 'unchanged' ? '' : ` (revision ${o.revision}${o.summary ? `: ${o.summary}` : ''})`;
          // Its compose file's secrets and configs first: they land in the same transaction.
          for (const f of o.objects ?? []) process.stdout.write(`${f.kind}/${f.name} ${f.result}${opts.dryRun ? ' (dry run)' : ''}\n`);
          process.stdout.write(`deployment/${o.name} ${o.result}${opts.dryRun ? ' (dry run)' : ''}${rev}\n`);
        }
        if (opts.dryRun) process.stdout.write(preview.length ? `\nThe scheduler would, now:\n${preview.map((l) => `  ${l}\n`).join('')}` : '\nThe scheduler would place or remove nothing now.\n');
      }),
    );

  composeOptions(
    program
      .command('delete')
      .description('Delete deployments named in manifests or compose files, or by name; their replicas are stopped by the scheduler')
      .argument('[type]', 'deployment (or deployment/NAME, as kubectl takes it)')
      .argument('[names...]', 'deployment names')
      .option('-f, --filename <path>', 'manifest or compose file, directory, or - (repeatable)', collect)
      .option('--ignore-not-found', 'succeed when a deployment does not exist'),
  )
    .addHelpText('after', '\nExamples:\n  jaco delete deployment hello\n  jaco delete -f examples/hello.yaml\n  jaco delete -f compose.yaml\n')
    .action(
      action(async (typeArg: string | undefined, nameArgs: string[], opts: { filename?: string[]; ignoreNotFound?: boolean } & ComposeFlags, cmd: Command) => {
        // kubectl's deployment/NAME (as jaco prints it) names the first one.
        const first = typeArg === undefined ? undefined : typeSlashName(typeArg, undefined);
        const type = first?.type;
        const names = first?.name !== undefined ? [first.name, ...nameArgs] : nameArgs;
        let targets: string[];
        // Like docker compose down: COMPOSE_FILE names the application when nothing else does (never the bare working directory: a delete names what it deletes).
        if (opts.filename?.length || (!type && composeFileVariable(process.env))) targets = manifestItems(opts.filename, opts).map((i) => i.name);
        else {
          if (!type || !['deployment', 'deployments', 'deploy'].includes(type)) throw new CliError('usage: jaco delete deployment NAME… | jaco delete -f FILE');
          if (!names.length) throw new CliError('name at least one deployment to delete');
          targets = names;
        }
        const deleted = await withStore(cmd, (store) => deleteDeployments(store, targets, { ignoreMissing: opts.ignoreNotFound }));
        for (const n of deleted) process.stdout.write(`deployment/${n} deleted\n`);
      }),
    );

  composeOptions(
    program
      .command('diff')
      .description('Show what apply would change, as a unified diff of the live and manifest specs (exit 1 when they differ)')
      .option('-f, --filename <path>', 'manifest or compose file, directory, or - (repeatable; default: COMPOSE_FILE, else the current directory\'s compose file)', collect),
  )
    .action(
      action(async (opts: { filename?: string[] } & ComposeFlags, cmd: Command) => {
        const read = manifestItems(opts.filename, opts);
        let differs = false;
        await withStore(cmd, async (store) => {
          // As apply would write it: images resolved (a build is said, not run).
          const items = await prepareImages(store, read, { dryRun: true });
          for (const item of items) {
            const { value, unreadable } = await readKey<Deployment>(store, keys.deployment(item.name), 'Deployment');
            // What cannot be read is diffed as nothing (apply replaces it), and named.
            warnUnreadable(unreadable ? [unreadable] : []);
            const live = value?.value;
            const d = yamlDiff(`deployment/${item.name}`, live?.spec, withDependencyHashes(await pinToStore(store, item.spec)));
            if (d) {
              differs = true;
              process.stdout.write(d);
            }
          }
        });
        return differs ? 1 : 0;
      }),
    );

  composeOptions(
    program
      .command('convert')
      .description('Print the Deployment a compose file maps to (warnings on stderr), to switch to the native format')
      .option('-f, --filename <path>', 'compose file, directory holding one, or - (repeatable; default: COMPOSE_FILE, else the current directory\'s compose file)', collect)
      .option('-o, --output <format>', 'yaml or json (the Deployment), or compose (the merged compose model, as docker compose config prints it)', 'yaml'),
  )
    .addHelpText(
      'after',
      '\nSeveral compose files are one application, merged in order (-f compose.yaml -f prod.yaml); a\ndirectory means its compose file and the compose.override.yaml beside it. extends and include are\nresolved; service names are mapped to jaco names (docs/compose.md).\n\nExamples:\n  jaco convert -f compose.yaml > deployment.yaml\n  jaco convert -f . -o json\n  jaco convert -f compose.yaml -f prod.yaml -o compose\n',
    )
    .action(
      action(async (opts: { filename?: string[]; output: string } & ComposeFlags) => {
        if (!['yaml', 'json', 'compose'].includes(opts.output)) throw new CliError(`-o ${opts.output}: use yaml, json or compose`);
        if (opts.output === 'compose') {
          const m = composeModel(readSources(withComposeFiles(inputFiles(opts.filename))).map((s) => composeSource(s.name, s.text)), { envFiles: opts.envFile });
          for (const w of m.warnings) process.stderr.write(`warning: ${formatProblem(w)}\n`);
          process.stdout.write(stringify(m.model));
          return;
        }
        const { deployments, items } = readInputs(opts.filename, opts);
        // The converted deployment refers to them by name; their values are never printed.
        for (const o of items.flatMap((i) => i.objects ?? []))
          process.stderr.write(`note: ${o.kind} ${o.name} (${o.kind} ${o.owner.name} of the compose file) is made by jaco apply from ${o.from}; to apply the converted manifest, make it first: jaco ${o.kind} create ${o.name} ${o.from.startsWith('/') ? `-f ${o.from}` : '-'}\n`);
        const out = deployments.map((d) => (opts.output === 'json' ? `${JSON.stringify(d, null, 2)}\n` : stringify(d)));
        process.stdout.write(opts.output === 'json' ? out.join('') : out.join('---\n'));
      }),
    );
}
