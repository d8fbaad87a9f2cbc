// Child processes jaco runs itself (etcd, the registry, a local cluster's agents and engines, an
// agent's wireguard-go): whether a program is installed, how one is started with its output in a
// log file, and how one is stopped — its signal, then SIGKILL after a grace.
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

/** Whether `bin --version` (or the given args) runs and exits 0. */
export function binaryAnswers(bin: string, args: string[] = ['--version']): boolean {
  const r = spawnSync(bin, args, { stdio: 'ignore' });
  return !r.error && r.status === 0;
}

/** Stops a child: `signal`, then SIGKILL after `graceMs`; resolves once it has exited (at once if it had). */
export function stopProcess(child: ChildProcess | undefined, opts: { signal?: NodeJS.Signals; graceMs?: number } = {}): Promise<void> {
  return new Promise<void>((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.graceMs ?? 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(opts.signal ?? 'SIGTERM');
  });
}

/**
 * Starts a program whose output (stdout and stderr both) is appended to `logFile`: the file's own
 * descriptor is the child's, so the kernel writes each line. Nothing is piped through this
 * process: when the child has exited every line it printed is in the file (a pipe would still hold
 * its last lines then, and two pipes into one stream end it at the first one's end), and the
 * child's output goes on if this process dies. `fileMode`: the file's mode when this makes it.
 */
export function spawnLogged(cmd: string, args: string[], logFile: string, opts: Omit<SpawnOptions, 'stdio'> & { fileMode?: number } = {}): ChildProcess {
  const { fileMode, ...spawnOpts } = opts;
  const fd = openSync(logFile, 'a', fileMode);
  try {
    return spawn(cmd, args, { ...spawnOpts, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
}
