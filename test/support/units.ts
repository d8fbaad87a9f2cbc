// The systemd units of deploy/, run the way systemd runs them — so a unit that names a wrong flag,
// a missing file or a port nothing listens on fails a test instead of an operator's first boot.
// This is systemd's part, written small: the [Service] section's Environment=, EnvironmentFile= and
// ExecStart= (words split as the shell does, which is what systemd's quoting amounts to for these
// units; the specifiers %H, %i and %%, and `$$` for `$`), and the one liberty a test host needs: a root for the paths the
// units name (/etc/jaco, /var/lib/jaco, …), and the installed binaries mapped to this checkout's.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse } from 'shell-quote';
import { etcdBinary } from '../../src/supervise/etcd.js';
import { registryBinary } from '../../src/supervise/registry.js';
import { JACO_BIN } from './cli.js';

export interface Unit {
  file: string;
  /** Environment= assignments, in order. */
  environment: Record<string, string>;
  /** EnvironmentFile= paths as the unit names them; optional ones (a leading "-") may be absent. */
  environmentFiles: { path: string; optional: boolean }[];
  /** ExecStart=, one command's words, specifiers not yet expanded. */
  execStart: string[];
  /** Type= (simple unless it says otherwise). */
  type: string;
  /** A template unit's instance (jaco-controller@scheduler: `scheduler`), its %i. */
  instance?: string;
}

/**
 * Reads a unit file's [Service] section (of a template unit, `name@.service`, as its `instance`).
 * Anything this does not understand is an error, never skipped.
 */
export function readUnit(file: string, instance?: string): Unit {
  if (/@\.service$/.test(file) !== (instance !== undefined)) throw new Error(`${file}: ${instance === undefined ? 'a template unit needs an instance' : 'not a template unit'}`);
  const unit: Unit = { file, environment: {}, environmentFiles: [], execStart: [], type: 'simple', ...(instance !== undefined ? { instance } : {}) };
  let section = '';
  let line = 0;
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    line++;
    const l = raw.trim();
    if (!l || l.startsWith('#') || l.startsWith(';')) continue;
    if (l.endsWith('\\')) throw new Error(`${file}:${line}: continued lines are not read here`);
    const head = /^\[(\w+)\]$/.exec(l);
    if (head) {
      section = head[1]!;
      continue;
    }
    const eq = l.indexOf('=');
    if (eq < 0) throw new Error(`${file}:${line}: not KEY=VALUE: ${l}`);
    if (section !== 'Service') continue;
    const [key, value] = [l.slice(0, eq), l.slice(eq + 1)];
    if (key === 'Environment') for (const w of words(value, file, line)) assign(unit.environment, w, file, line);
    else if (key === 'EnvironmentFile') unit.environmentFiles.push(value.startsWith('-') ? { path: value.slice(1), optional: true } : { path: value, optional: false });
    else if (key === 'ExecStart') {
      if (unit.execStart.length) throw new Error(`${file}:${line}: a second ExecStart`);
      unit.execStart = words(value, file, line);
    } else if (key === 'Type') unit.type = value;
  }
  if (!unit.execStart.length) throw new Error(`${file}: no ExecStart in [Service]`);
  return unit;
}

function words(value: string, file: string, line: number): string[] {
  return parse(value).map((w) => {
    if (typeof w !== 'string') throw new Error(`${file}:${line}: shell syntax systemd does not read: ${JSON.stringify(w)}`);
    return w;
  });
}

function assign(into: Record<string, string>, w: string, file: string, line: number): void {
  const eq = w.indexOf('=');
  if (eq <= 0) throw new Error(`${file}:${line}: not NAME=VALUE: ${w}`);
  into[w.slice(0, eq)] = w.slice(eq + 1);
}

/** An environment file as systemd reads one: NAME=VALUE lines, comments, quotes. */
export function readEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  let line = 0;
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    line++;
    const l = raw.trim();
    if (!l || l.startsWith('#') || l.startsWith(';')) continue;
    const w = words(l, file, line);
    if (w.length !== 1) throw new Error(`${file}:${line}: one NAME=VALUE per line`);
    assign(out, w[0]!, file, line);
  }
  return out;
}

export interface Host {
  /** %H */
  hostname: string;
  /** Where this host's filesystem paths live: /etc/jaco/x is `${root}/etc/jaco/x`. */
  root: string;
  /** The jaco installed on this host (/opt/jaco/bin/jaco: test/support/package.ts installJaco); absent, this checkout's bin/jaco. */
  jaco?: string;
}

/** The paths a unit may name on a host, mapped under its root; the installed programs, to this machine's. */
const PROGRAMS: Record<string, () => string> = {
  '/usr/bin/node': () => process.execPath,
  '/opt/jaco/bin/jaco': () => JACO_BIN,
  '/usr/bin/etcd': etcdBinary,
  '/usr/bin/docker-registry': registryBinary,
};
/** A host's own files; /etc/docker/certs.d stays the machine's (every engine here reads that one). */
const HOST_PATHS = /^\/(etc\/jaco|var\/lib\/jaco|var\/lib\/etcd-jaco|var\/backups\/jaco|etc\/docker\/registry|var\/lib\/docker-registry)(\/|$)/;

function onHost(host: Host, word: string): string {
  // A program or a path, the whole word or inside it (an `sh -c '…'` script, --data-dir=/var/lib/…,
  // JACO_SECRETS_KEY_FILE=/etc/jaco/…).
  return word.replace(/(^|=|\s)(\/[^\s=]*)/g, (m, pre: string, path: string) => {
    if (path === '/opt/jaco/bin/jaco' && host.jaco) return `${pre}${host.jaco}`;
    const program = PROGRAMS[path];
    if (program) return `${pre}${program()}`;
    return HOST_PATHS.test(path) ? `${pre}${join(host.root, path)}` : m;
  });
}

/** Where a path the units name is on `host` (/etc/jaco/jaco.env → <root>/etc/jaco/jaco.env). */
export const hostPath = (host: Host, path: string) => onHost(host, path);

/** Puts a file on a host as an operator would copy it there: its text (with the host paths it names mapped) and its mode. */
export function placeFile(host: Host, path: string, text: string, mode = 0o644): string {
  const to = onHost(host, path);
  mkdirSync(dirname(to), { recursive: true });
  writeFileSync(to, text.replace(/(^|[\s=:'"])(\/[^\s'",]*)/gm, (m, pre: string, p: string) => (HOST_PATHS.test(p) ? `${pre}${join(host.root, p)}` : m)), { mode });
  chmodSync(to, mode);
  return to;
}

/** systemd's specifiers the units use (%H the host name, %i the instance, %% a %). */
function specifiers(unit: Unit, host: Host, w: string): string {
  return w.replace(/%[%Hi]/g, (s) => {
    if (s === '%%') return '%';
    if (s === '%H') return host.hostname;
    if (unit.instance === undefined) throw new Error(`${unit.file}: %i in a unit that is no template instance`);
    return unit.instance;
  });
}

/** What systemd would run for the unit on `host`: the command, its arguments and its environment. */
export function commandOf(unit: Unit, host: Host, baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH }): { cmd: string; args: string[]; env: NodeJS.ProcessEnv } {
  const env: NodeJS.ProcessEnv = { ...baseEnv };
  // systemd's order: Environment= first, then each EnvironmentFile= over it.
  for (const [k, v] of Object.entries(unit.environment)) env[k] = onHost(host, specifiers(unit, host, v));
  for (const f of unit.environmentFiles) {
    const path = onHost(host, specifiers(unit, host, f.path));
    if (!existsSync(path)) {
      if (f.optional) continue;
      throw new Error(`${unit.file}: EnvironmentFile ${f.path} is missing on ${host.hostname} (${path})`);
    }
    for (const [k, v] of Object.entries(readEnvFile(path))) env[k] = onHost(host, v);
  }
  // In a command line `$$` is a `$` (systemd's escape: the shell it starts sees the variable).
  const [cmd, ...args] = unit.execStart.map((w) => onHost(host, specifiers(unit, host, w)).replace(/\$\$/g, '$'));
  return { cmd: cmd!, args, env };
}
