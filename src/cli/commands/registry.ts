// jaco registry login | logout | ls | default: the registries' access the nodes pull with
// (registries/<host>) and the cluster's image setting (config/images). A password is read from
// standard input only, and never printed.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { ImageSettings, Registry } from '../../api/types.js';
import { registryAccessFor } from '../../images/access.js';
import { pushLocalImage } from '../../images/build.js';
import { operatorCredentials } from '../../images/credentials.js';
import { atRegistry, DEFAULT_TAG, familiarString, formatReference, InvalidReferenceError, parseImageReference, parseRegistryHost } from '../../images/reference.js';
import { dockerode } from '../../dockerode.js';
import { checkRegistryLogin, ImageAccessError } from '../../images/registry.js';
import { action, CliError, parseOutput, withStore } from '../common.js';
import { age, printObjects, printTable } from '../../app/output.js';
import { changeImageSettings, readImageAccess, removeRegistryLogin, storeRegistryLogin } from '../../app/registries.js';

function hostOf(arg: string): string {
  try {
    return parseRegistryHost(arg);
  } catch (e) {
    if (e instanceof InvalidReferenceError) throw new CliError(`${JSON.stringify(arg)} is ${e.reason}`);
    throw e;
  }
}

/** All of standard input, less the one newline `echo` or a file adds (as docker login --password-stdin). */
async function readPasswordStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += (chunk as Buffer).toString('utf8');
  const password = text.replace(/\n$/, '').replace(/\r$/, '');
  if (!password) throw new CliError('the password read from standard input is empty');
  return password;
}

function readCa(file: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read --ca-file ${file}: ${(e as Error).message}`);
  }
  try {
    if (!new X509Certificate(pem).ca) throw new Error('not a CA certificate');
  } catch (e) {
    throw new CliError(`--ca-file ${file} is not a PEM CA certificate (${(e as Error).message})`);
  }
  return pem.trim() + '\n';
}

const yesNo = (b: boolean | undefined) => (b ? 'yes' : 'no');

interface LoginFlags {
  username?: string;
  passwordStdin?: boolean;
  caFile?: string;
  insecure?: boolean;
  verify: boolean;
}

export function registerRegistry(program: Command): void {
  const registry = program.command('registry').description("Image registries: the access nodes pull with (stored in etcd, readable by the agents and controllers only) and the cluster's default registry");

  registry
    .command('login')
    .summary("store a registry's access (user, password, CA, insecure) for the nodes")
    .description('Store the access to a registry that every node pulls with: a user and password, the CA that signs its certificate, or plain HTTP. Replaces what was stored for it. The login is checked against the registry first (as docker login does) unless --no-verify')
    .argument('<registry>', 'host[:port] as image references name it, e.g. 127.0.0.1:5000, ghcr.io, docker.io')
    .option('-u, --username <user>', 'the user to pull as')
    .option('--password-stdin', 'read the password from standard input (it is never taken from the command line)')
    .option('--ca-file <file>', "PEM of the CA that signs the registry's certificate (e.g. the cluster CA)")
    .option('--insecure', 'the registry serves plain HTTP, no TLS')
    .option('--no-verify', 'store without asking the registry (e.g. it cannot be reached from here)')
    .addHelpText(
      'after',
      `
The password is stored as a secret sealed to the cluster key (registry_<host>_<version>), copied
only to the nodes whose replicas pull from the registry, each sealed to that node's own key (the
secrets controller must run with a cluster key file, as jaco up's does). jaco never prints it
(jaco registry ls shows the user). jaco apply and jaco registry push use your own docker login.

Examples:
  echo "$CI_TOKEN" | jaco registry login ghcr.io --username ci-bot --password-stdin
  jaco registry login 127.0.0.1:5000 -u jaco --password-stdin --ca-file .jaco/pki/ca.pem < pw.txt
  jaco registry login 10.0.0.5:5000 --insecure --no-verify
`,
    )
    .action(
      action(async (arg: string, opts: LoginFlags, cmd: Command) => {
        const host = hostOf(arg);
        if (opts.passwordStdin && opts.username === undefined) throw new CliError('--password-stdin needs --username');
        if (opts.username !== undefined && !opts.passwordStdin) throw new CliError('give the password on standard input with --password-stdin (it is never taken from the command line)');
        if (opts.insecure && opts.caFile) throw new CliError('--insecure (plain HTTP) and --ca-file (a CA for TLS) exclude each other');
        const caPem = opts.caFile ? readCa(opts.caFile) : undefined;
        const password = opts.passwordStdin ? await readPasswordStdin() : undefined;
        const login = { host, ...(opts.username !== undefined ? { username: opts.username, password: password! } : {}), ...(caPem ? { caPem } : {}), ...(opts.insecure ? { insecure: true } : {}) };
        if (opts.verify) {
          try {
            await checkRegistryLogin({ registry: host, ...(login.username !== undefined ? { credentials: { username: login.username, password: login.password! } } : {}), ...(caPem ? { caPem } : {}), ...(opts.insecure ? { insecure: true } : {}) });
          } catch (e) {
            if (e instanceof ImageAccessError) throw new CliError(`${e.detail} (${e.code}); nothing was stored (--no-verify stores without checking)`);
            throw e;
          }
        }
        const result = await withStore(cmd, (s) => storeRegistryLogin(s, login));
        const details = [login.username !== undefined ? `user ${login.username}` : 'no user', caPem ? 'CA set' : '', opts.insecure ? 'insecure (plain HTTP)' : '', opts.verify ? 'login checked' : 'not checked'].filter(Boolean).join(', ');
        process.stdout.write(`registry/${host} ${result}: ${details}\n`);
      }),
    );

  registry
    .command('logout')
    .summary("remove a registry's stored access")
    .description("Remove a registry's stored access: nodes pull from it without credentials from now on")
    .argument('<registry>', 'host[:port]')
    .addHelpText('after', '\nExamples:\n  jaco registry logout ghcr.io\n  jaco registry logout 127.0.0.1:5000\n')
    .action(
      action(async (arg: string, _o: unknown, cmd: Command) => {
        const host = hostOf(arg);
        const removed = await withStore(cmd, (s) => removeRegistryLogin(s, host));
        process.stdout.write(removed ? `registry/${host} removed\n` : `registry/${host}: nothing stored\n`);
      }),
    );

  registry
    .command('ls')
    .alias('list')
    .summary('list the registries with stored access')
    .description('List the registries with stored access: host, user, whether a CA is set, insecure (never a password)')
    .option('-o, --output <format>', 'yaml or json (passwords left out)')
    .addHelpText('after', '\nExamples:\n  jaco registry ls\n  jaco registry ls -o yaml\n')
    .action(
      action(async (opts: { output?: string }, cmd: Command) => {
        const out = parseOutput(opts.output, ['table', 'yaml', 'json']);
        const { registries, settings, revision } = await withStore(cmd, (s) => readImageAccess(s));
        if (out !== 'table') return printObjects(out, registries.map((r) => r.value), false, revision);
        const rows = registries.map(({ value: r }: { value: Registry }) => [r.spec.host, r.spec.username ?? '-', yesNo(!!r.spec.caPem), yesNo(r.spec.insecure), r.spec.host === settings.defaultRegistry ? 'yes' : 'no', age(r.metadata.creationTimestamp)]);
        printTable(['HOST', 'USER', 'CA', 'INSECURE', 'DEFAULT', 'AGE'], rows);
      }),
    );

  registry
    .command('default')
    .summary("show or set the default registry and whether short names may go to Docker Hub")
    .description("Show or set the cluster's image setting: the default registry (where builds are pushed and short names such as busybox or team/app are resolved) and whether short names may go to Docker Hub when there is none (default: no)")
    .argument('[registry]', 'host[:port] to make the default')
    .option('--unset', 'have no default registry')
    .option('--hub', 'short names may be resolved at Docker Hub when there is no default registry')
    .option('--no-hub', 'short names are never resolved at Docker Hub (the default)')
    .option('-o, --output <format>', 'yaml or json')
    .addHelpText('after', '\nExamples:\n  jaco registry default\n  jaco registry default 127.0.0.1:5000\n  jaco registry default --hub\n  jaco registry default --unset --no-hub\n')
    .action(
      action(async (arg: string | undefined, opts: { unset?: boolean; hub?: boolean; output?: string }, cmd: Command) => {
        const out = parseOutput(opts.output, ['table', 'yaml', 'json']);
        if (arg && opts.unset) throw new CliError('give a registry or --unset, not both');
        // commander sets hub to true by default because of --no-hub: only a flag given is a change.
        const hubGiven = cmd.getOptionValueSource('hub') === 'cli';
        const change = { ...(arg ? { defaultRegistry: hostOf(arg) } : opts.unset ? { defaultRegistry: null } : {}), ...(hubGiven ? { hub: !!opts.hub } : {}) };
        const { settings, changed, revision } = await withStore(cmd, async (s) => {
          if (Object.keys(change).length) return { ...(await changeImageSettings(s, change)), revision: undefined };
          const read = await readImageAccess(s);
          return { settings: read.settings, changed: false, revision: read.revision };
        });
        if (out !== 'table') {
          const obj: ImageSettings = { apiVersion: 'jaco.dev/v1', kind: 'ImageSettings', metadata: { name: 'images' }, spec: settings };
          return printObjects(out, [obj], true, revision);
        }
        if (Object.keys(change).length) process.stdout.write(changed ? 'image settings changed\n' : 'image settings unchanged\n');
        process.stdout.write(`default registry: ${settings.defaultRegistry ?? '<none>'}\nshort names at Docker Hub: ${yesNo(settings.hub)}\n`);
      }),
    );

  registry
    .command('push')
    .summary("push images of your Docker engine to the cluster's registry")
    .description("Push images of your local Docker engine to a registry (default: the cluster's default registry) under the same repository and tag, so that every node can pull them and `jaco apply` resolves their short names there")
    .argument('<image...>', 'local images, e.g. jaco-demo/busybox:1')
    .option('--registry <host>', "the registry to push to (default: the cluster's default registry)")
    .addHelpText('after', "\nmake up pushes the demo images so: every node's engine starts empty, as a new host does.\n\nExamples:\n  jaco registry push jaco-demo/busybox:1 jaco-demo/postgres:15\n  jaco registry push myapp:dev --registry 127.0.0.1:5000\n")
    .action(
      action(async (images: string[], opts: { registry?: string }, cmd: Command) => {
        const { registries, settings } = await withStore(cmd, (s) => readImageAccess(s));
        const host = opts.registry ? hostOf(opts.registry) : settings.defaultRegistry;
        if (!host) throw new CliError('the cluster has no default registry: give --registry HOST, or set one with `jaco registry default HOST`');
        const docker = new (dockerode())();
        const credentials = registryAccessFor(host, registries.map((r) => r.value), await operatorCredentials(host)).credentials;
        for (const image of images) {
          let ref;
          try {
            ref = parseImageReference(image);
          } catch (e) {
            if (e instanceof InvalidReferenceError) throw new CliError(`${JSON.stringify(image)} is ${e.reason}`);
            throw e;
          }
          const local = familiarString(ref);
          const target = formatReference({ ...atRegistry(ref, host), tag: ref.tag ?? DEFAULT_TAG, digest: undefined });
          const started = Date.now();
          let digest: string;
          try {
            digest = await pushLocalImage(docker, local, target, credentials);
          } catch (e) {
            if (e instanceof ImageAccessError) throw new CliError(`${local}: ${e.message}`);
            throw e;
          }
          process.stdout.write(`${local} -> ${familiarString(parseImageReference(target))}@${digest} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
        }
      }),
    );
}
