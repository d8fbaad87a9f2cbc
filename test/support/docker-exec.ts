// Reading a container's output with dockerode: a command run in it (docker exec) with its exit
// code, stdout and stderr, and its logs split by stream. Both come multiplexed from Docker when the
// container has no TTY (8-byte frame headers: stream 1 or 2, then the length).
import type Docker from 'dockerode';
import { eventually } from './wait.js';

export interface Output {
  stdout: string;
  stderr: string;
}

export interface ExecResult extends Output {
  code: number;
}

/** Splits Docker's multiplexed stream (no TTY) into stdout and stderr. */
export function demux(buf: Buffer): Output {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  for (let at = 0; at + 8 <= buf.length; ) {
    const size = buf.readUInt32BE(at + 4);
    const frame = buf.subarray(at + 8, at + 8 + size);
    (buf[at] === 2 ? err : out).push(frame);
    at += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

/** Runs `cmd` in the running container and waits for it to exit. */
export async function execIn(container: Docker.Container, cmd: string[], env: string[] = []): Promise<ExecResult> {
  const exec = await container.exec({ Cmd: cmd, Env: env, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve());
    stream.on('close', () => resolve());
    stream.on('error', reject);
  });
  // The stream ends as the process exits; Docker records the code a moment later.
  const code = await eventually(async () => {
    const i = await exec.inspect();
    return i.Running ? undefined : i.ExitCode ?? undefined;
  }, { timeoutMs: 10_000, intervalMs: 20, what: `the exit code of ${cmd.join(' ')}` });
  return { code, ...demux(Buffer.concat(chunks)) };
}

/** The container's logs so far, by stream. */
export async function logsOf(container: Docker.Container): Promise<Output> {
  const buf = (await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
  return demux(buf);
}
