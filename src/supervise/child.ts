// Child processes jaco runs itself (etcd, the registry, a local cluster's agents and engines):
// whether a program is installed, and how one is stopped — its signal, then SIGKILL after a grace.
import { spawnSync, type ChildProcess } from 'node:child_process';

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
