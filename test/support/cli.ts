// Runs the built CLI (./bin/jaco) as a child process, as an operator would.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export const JACO_BIN = join(PACKAGE_ROOT, 'bin', 'jaco');

export function jaco(args: string[], opts: { endpoint?: string; prefix?: string; input?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...opts.env };
    if (opts.endpoint) env.JACO_ENDPOINTS = opts.endpoint;
    if (opts.prefix) env.JACO_PREFIX = opts.prefix;
    const child = spawn(process.execPath, [JACO_BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`jaco ${args.join(' ')} did not finish in ${opts.timeoutMs ?? 30_000} ms; stderr: ${stderr}`));
    }, opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}
