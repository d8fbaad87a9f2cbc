// jaco secret / jaco config: create, ls, inspect, rm — values in, never out — and the cluster key
// file's rotation (jaco secret key ls|rotate|prune). docs/secrets.md.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { MAX_FILE_OBJECT_BYTES } from '../../api/crds.js';
import { keys } from '../../api/keys.js';
import { readCapped, sizeText } from '../../api/capped-read.js';
import type { ClusterKey, Config, FileKind, Secret } from '../../api/types.js';
import { addClusterKey, ensureClusterKeyFile, readClusterKeys, removeClusterKeys } from '../../secrets/keyfile.js';
import { action, CliError, parseOutput, withStore } from '../common.js';
import { age, printObjects, printTable } from '../../app/output.js';
import { createObject, objectViews, readFileObjects, removeObjects, type ObjectView } from '../../app/secrets.js';

/** The value: a file, or stdin with `-` — never an argument (it would stay in the shell's history). */
async function readValue(kind: FileKind, file: string | undefined, dash: string | undefined): Promise<Buffer> {
  if (file && dash) throw new CliError(`give the ${kind}'s value once: -f FILE, or - for stdin`);
  const from = file ?? dash;
  if (!from) throw new CliError(`give the ${kind}'s value with -f FILE, or - to read it from stdin (never as an argument: it would stay in your shell's history)`);
  // Read no further than a value can be, plus a byte to tell: /dev/zero or an endless pipe ends here.
  let value: Buffer | undefined;
  try {
    value = readCapped(from === '-' ? 0 : from, MAX_FILE_OBJECT_BYTES);
  } catch (e) {
    throw new CliError(`cannot read ${from}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (!value) throw new CliError(`${from === '-' ? 'stdin' : from} holds more than ${sizeText(MAX_FILE_OBJECT_BYTES)}; a ${kind} holds at most ${MAX_FILE_OBJECT_BYTES} (500 KiB)`);
  return value;
}

function table(kind: FileKind, views: ObjectView[], now: number, wide: boolean): void {
  const headers = ['NAME', 'SIZE', kind === 'secret' ? 'SEALED TO' : 'DIGEST', 'USED BY', 'NODES', 'AGE', ...(wide ? ['OWNER'] : [])];
  printTable(
    headers,
    views.map((v) => [
      v.metadata.name,
      v.spec.size,
      kind === 'secret' ? v.spec.sealedTo : v.spec.digest!.slice(0, 19),
      v.status.usedBy.join(',') || '-',
      v.status.nodes.length,
      age(v.metadata.creationTimestamp, now),
      ...(wide ? [v.spec.owner ? `${v.spec.owner.deployment} (${v.spec.owner.name})` : '-'] : []),
    ]),
  );
}

/** `jaco get secrets|configs` and `jaco secret|config ls` print the same thing. */
export async function printFileObjects(cmd: Command, kind: FileKind, name: string | undefined, out: string): Promise<void> {
  await withStore(cmd, async (store) => {
    const cache = await readFileObjects(store);
    try {
      const views = objectViews(cache, kind).filter((v) => !name || v.metadata.name === name);
      if (name && !views.length) throw new CliError(`${kind} "${name}" not found`);
      if (out === 'table' || out === 'wide') table(kind, views, Date.now(), out === 'wide');
      else printObjects(out, views, !!name, cache.revision);
    } finally {
      await cache.stop();
    }
  });
}

/** `jaco describe secret|config NAME` and `jaco secret|config inspect`. */
export async function describeFileObject(cmd: Command, kind: FileKind, name: string): Promise<string> {
  return withStore(cmd, async (store) => {
    const cache = await readFileObjects(store);
    try {
      const v = objectViews(cache, kind).find((x) => x.metadata.name === name);
      if (!v) throw new CliError(`${kind} "${name}" not found`);
      const lines = [
        `Name:         ${v.metadata.name}`,
        `Created:      ${v.metadata.creationTimestamp ?? '?'}`,
        `Size:         ${v.spec.size} bytes`,
        kind === 'secret' ? `Sealed to:    cluster key ${v.spec.sealedTo} (the value is never shown)` : `Digest:       ${v.spec.digest}`,
        `Owner:        ${v.spec.owner ? `deployment ${v.spec.owner.deployment} (compose ${kind} ${v.spec.owner.name})` : '-'}`,
        `Used by:      ${v.status.usedBy.join(', ') || '-'}`,
        `Copies on:    ${v.status.nodes.join(', ') || '-'}`,
      ];
      return `${lines.join('\n')}\n`;
    } finally {
      await cache.stop();
    }
  });
}

function registerKind(program: Command, kind: FileKind): Command {
  const plural = `${kind}s`;
  const c = program
    .command(kind)
    .description(
      kind === 'secret'
        ? 'Manage secrets: values sealed to the cluster key, copied only to the nodes whose replicas use them, given to containers on a tmpfs (docs/secrets.md)'
        : 'Manage configs: files given to containers, copied only to the nodes whose replicas use them (docs/secrets.md)',
    );
  c.command('create')
    .description(`Create a ${kind} from a file or stdin (immutable: a new value is a new name)`)
    .argument('<name>', `the ${kind}'s name: letters, digits, _ . -`)
    .argument('[stdin]', '- : read the value from stdin')
    .option('-f, --file <file>', 'read the value from this file')
    .addHelpText(
      'after',
      kind === 'secret'
        ? "\nExamples:\n  jaco secret create db_password -f ./db_password.txt\n  openssl rand -base64 24 | jaco secret create db_password_v2 -\n\nThe value is sealed on this machine to the cluster key's public half (published by the secrets\ncontroller); it is never printed, logged or audited, and never given as an argument.\n"
        : '\nExamples:\n  jaco config create nginx.conf -f ./nginx.conf\n  printf "listen 80;\\n" | jaco config create site.conf -\n',
    )
    .action(
      action(async (name: string, dash: string | undefined, opts: { file?: string }, cmd: Command) => {
        if (dash !== undefined && dash !== '-') throw new CliError(`unexpected argument ${JSON.stringify(dash)}: give the value with -f FILE, or - for stdin`);
        const value = await readValue(kind, opts.file, dash);
        const o = await withStore(cmd, (store) => createObject(store, kind, name, value));
        value.fill(0);
        process.stdout.write(`${kind}/${name} created (${o.spec.size} bytes${o.kind === 'Secret' ? `, sealed to cluster key ${(o as Secret).spec.sealed.key}` : `, ${(o as Config).spec.digest.slice(0, 19)}`})\n`);
      }),
    );
  c.command('ls')
    .alias('list')
    .description(`List ${plural}: size, ${kind === 'secret' ? 'the cluster key each is sealed to' : 'digest'}, the services using each and the nodes holding a copy (never a value)`)
    .option('-o, --output <format>', 'yaml, json or wide')
    .action(action(async (opts: { output?: string }, cmd: Command) => printFileObjects(cmd, kind, undefined, parseOutput(opts.output, ['table', 'wide', 'yaml', 'json']))));
  c.command('inspect')
    .description(`Show one ${kind}: its size, ${kind === 'secret' ? 'key' : 'digest'}, owner, users and nodes (never its value)`)
    .argument('<name>')
    .option('-o, --output <format>', 'yaml or json')
    .action(
      action(async (name: string, opts: { output?: string }, cmd: Command) => {
        if (opts.output) return printFileObjects(cmd, kind, name, parseOutput(opts.output, ['yaml', 'json']));
        process.stdout.write(await describeFileObject(cmd, kind, name));
      }),
    );
  c.command('rm')
    .alias('remove')
    .description(`Remove ${plural}; refused (nothing removed) while a service uses one, naming it`)
    .argument('<names...>')
    .addHelpText('after', `\nExamples:\n  jaco ${kind} rm ${kind === 'secret' ? 'db_password' : 'nginx.conf'}\n`)
    .action(
      action(async (names: string[], _opts: unknown, cmd: Command) => {
        await withStore(cmd, (store) => removeObjects(store, kind, names));
        for (const n of names) process.stdout.write(`${kind}/${n} removed\n`);
      }),
    );
  return c;
}

/** jaco secret key ls|rotate|prune: the cluster key file, on a host that holds it. */
function registerKeyCommands(secret: Command): void {
  const keyFileOption = (c: Command) => c.option('--key-file <file>', 'the cluster key file (env JACO_SECRETS_KEY_FILE; jaco up: .jaco/secrets.key)');
  const keyFile = (o: { keyFile?: string }) => {
    const f = o.keyFile ?? process.env.JACO_SECRETS_KEY_FILE;
    if (!f) throw new CliError('name the cluster key file: --key-file FILE (or JACO_SECRETS_KEY_FILE)');
    return f;
  };
  const key = secret.command('key').description("The cluster key file: its keys, and rotating them (on a host that holds the file; the controllers read it again when it changes)");
  keyFileOption(
    key
      .command('ls')
      .description('List the keys of the cluster key file: which seals now, which is published, and how many secrets are sealed to each'),
  ).action(
    action(async (opts: { keyFile?: string }, cmd: Command) => {
      const ring = readClusterKeys(keyFile(opts));
      await withStore(cmd, async (store) => {
        const cache = await readFileObjects(store);
        try {
          const sealed = new Map<string, number>();
          for (const s of cache.kind<Secret>('secrets').items.values()) sealed.set(s.value.spec.sealed.key, (sealed.get(s.value.spec.sealed.key) ?? 0) + 1);
          const published = [...cache.kind<ClusterKey>('clusterkey').items.values()][0]?.value.spec.id;
          printTable(
            ['ID', 'CREATED', 'SEALS', 'PUBLISHED', 'SECRETS'],
            ring.keys.map((k) => [k.id, k.created, k.id === ring.primary.id ? 'yes' : 'no', k.id === published ? 'yes' : 'no', sealed.get(k.id) ?? 0]),
          );
          const strangers = [...sealed.keys()].filter((id) => !ring.has(id));
          if (strangers.length) process.stderr.write(`warning: secrets are sealed to keys this file does not hold: ${strangers.join(', ')} (another key file?)\n`);
        } finally {
          await cache.stop();
        }
      });
    }),
  );
  keyFileOption(
    key
      .command('rotate')
      .description('Add a new key to the cluster key file: it seals from now on; the secrets controller publishes it and re-seals every secret to it')
      .addHelpText(
        'after',
        '\nThen: copy the file to every controller host (it must be the same everywhere); the leader of\nthe secrets controller publishes the new key and re-seals every secret to it. Once `jaco secret\nkey ls` shows 0 secrets under the older keys, `jaco secret key prune` removes them.\n',
      ),
  ).action(
    action(async (opts: { keyFile?: string }) => {
      const f = keyFile(opts);
      const k = ensureClusterKeyFileExists(f) ? addClusterKey(f) : ensureClusterKeyFile(f).primary;
      process.stdout.write(`cluster key ${k.id} added to ${f}; it seals from now on. Copy the file to every controller host; the secrets controller publishes it and re-seals every secret to it (jaco secret key ls --key-file ${f}).\n`);
    }),
  );
  keyFileOption(
    key
      .command('prune')
      .description('Remove from the cluster key file the keys no secret is sealed to any more (never the newest, never the published one)'),
  ).action(
    action(async (opts: { keyFile?: string }, cmd: Command) => {
      const f = keyFile(opts);
      const ring = readClusterKeys(f);
      const removed = await withStore(cmd, async (store) => {
        const cache = await readFileObjects(store);
        try {
          const inUse = new Set([...cache.kind<Secret>('secrets').items.values()].map((s) => s.value.spec.sealed.key));
          const published = [...cache.kind<ClusterKey>('clusterkey').items.values()][0]?.value.spec.id;
          if (published !== ring.primary.id) throw new CliError(`the published cluster key is ${published ?? 'none'}, not this file's newest (${ring.primary.id}): is the secrets controller running with this file? Nothing was removed`);
          const drop = new Set(ring.keys.filter((k) => !inUse.has(k.id)).map((k) => k.id));
          const kept = ring.keys.filter((k) => inUse.has(k.id) && k.id !== ring.primary.id).map((k) => `${k.id} (${[...cache.kind<Secret>('secrets').items.values()].filter((s) => s.value.spec.sealed.key === k.id).length} secrets)`);
          if (kept.length) process.stderr.write(`kept, still sealing secrets (the controller re-seals them; run prune again later): ${kept.join(', ')}\n`);
          return removeClusterKeys(f, drop);
        } finally {
          await cache.stop();
        }
      });
      process.stdout.write(removed.length ? `removed ${removed.join(', ')} from ${f}; copy the file to every controller host\n` : `nothing to remove from ${f}\n`);
    }),
  );
}

function ensureClusterKeyFileExists(f: string): boolean {
  try {
    readFileSync(f);
    return true;
  } catch {
    return false;
  }
}

export function registerSecrets(program: Command): void {
  registerKeyCommands(registerKind(program, 'secret'));
  const config = registerKind(program, 'config');
  // Configs are not secret: their content may be printed.
  config
    .command('cat')
    .description("Print a config's content (configs are not secret; there is no such command for secrets)")
    .argument('<name>')
    .action(
      action(async (name: string, _o: unknown, cmd: Command) => {
        const c = await withStore(cmd, (store) => store.get<Config>(keys.config(name)));
        if (!c) throw new CliError(`config "${name}" not found`);
        process.stdout.write(Buffer.from(c.value.spec.data, 'base64'));
      }),
    );
}
