// The agent's narrow door to Docker (dockerode): list and inspect its own containers, pull, create,
// start, stop (always with the container's own StopSignal and StopTimeout), remove, stats and the
// event stream. It only ever addresses containers labelled with its cluster and node.
import type { DockerInfoStorage } from './disk.js';
import type Docker from 'dockerode';
import { dockerode } from '../../src/dockerode.js';
import type { CgroupUsage } from './cgroup.js';
import { dockerConnection } from './capacity.js';
import { imageWithTag, ownerLabels } from './container-spec.js';
import { factsFromInspect, type ContainerFacts } from './facts.js';
import { usageFromDockerStats } from './pressure.js';
import { DockerApiError, DockerUnreachableError, HealthExecTimeout, statusOf, type ContainerEngine, type Owner } from './engine.js';
import type { PullAuth } from '../../src/images/access.js';

const UNREACHABLE = /ECONNREFUSED|ENOENT|EACCES|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|socket hang up/;

/** Normalises dockerode's errors into the engine's two kinds (engine.ts). */
export function dockerError(host: string, e: unknown): Error {
  if (e instanceof DockerUnreachableError || e instanceof DockerApiError) return e;
  const err = e as { statusCode?: number; json?: { message?: string } | string | null; message?: string; code?: string; reason?: string };
  if (typeof err?.statusCode === 'number') {
    // Streamed calls (pull) carry no json; their message is "(HTTP code 500) server error - <why>".
    const fromMessage = /^\(HTTP code \d+\) [^-]*- (.+)$/s.exec(err.message ?? '')?.[1];
    const msg = (typeof err.json === 'object' && err.json?.message) || (typeof err.json === 'string' && err.json) || fromMessage || err.reason || err.message || 'error';
    return new DockerApiError(String(msg).trim(), err.statusCode);
  }
  const text = `${err?.code ?? ''} ${err?.message ?? String(e)}`;
  if (UNREACHABLE.test(text)) return new DockerUnreachableError(host, (err?.message ?? text).trim());
  return e as Error;
}

/** The agent's runtime on a real host: Docker through dockerode. */
export class DockerEngine implements ContainerEngine {
  readonly docker: Docker;

  constructor(readonly host: string, readonly owner: Owner) {
    this.docker = new (dockerode())(dockerConnection(host));
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw dockerError(this.host, e);
    }
  }

  storageInfo(): Promise<DockerInfoStorage> {
    return this.call(async () => (await this.docker.info()) as DockerInfoStorage);
  }

  ping(): Promise<void> {
    return this.call(async () => {
      await this.docker.ping();
    });
  }

  /** The engine's runtimes (docker info's Runtimes): part of the node's capacity. */
  runtimes(): Promise<string[]> {
    return this.call(async () => Object.keys(((await this.docker.info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {}).sort());
  }

  /** Ids of every container (any state) labelled with this agent's cluster and node. */
  listOwn(): Promise<string[]> {
    return this.call(async () => (await this.docker.listContainers({ all: true, filters: { label: ownerLabels(this.owner) } })).map((c) => c.Id));
  }

  /** Facts of a container, or undefined when it is gone. */
  async inspect(id: string): Promise<ContainerFacts | undefined> {
    try {
      return factsFromInspect(await this.call(() => this.docker.getContainer(id).inspect()));
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw e;
    }
  }

  async imagePresent(image: string): Promise<boolean> {
    try {
      await this.call(() => this.docker.getImage(imageWithTag(image)).inspect());
      return true;
    } catch (e) {
      if (statusOf(e) === 404) return false;
      throw e;
    }
  }

  /** Pulls in flight, by image: every start of one image waits for one pull. */
  private readonly pulls = new Map<string, Promise<void>>();

  /**
   * Pulls an image to the end of its progress stream. Starts of one image share one pull (17
   * replicas landing on a fresh node ask the engine once, not 17 times); an abort ends the wait
   * of the start that aborted, and the shared pull goes on for the others.
   */
  pull(image: string, signal?: AbortSignal, auth?: PullAuth): Promise<void> {
    let shared = this.pulls.get(image);
    if (!shared) {
      shared = this.pullOnce(image, auth).finally(() => this.pulls.delete(image));
      this.pulls.set(image, shared);
    }
    if (!signal) return shared;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(new Error(`pull of ${image} no longer awaited: the start was cancelled`));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      shared.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  private pullOnce(image: string, auth?: PullAuth): Promise<void> {
    return this.call(async () => {
      const stream = (await this.docker.pull(imageWithTag(image), auth ? { authconfig: auth } : {})) as NodeJS.ReadableStream;
      await new Promise<void>((resolve, reject) =>
        this.docker.modem.followProgress(stream, (err: Error | null, output: { error?: string; errorDetail?: { message?: string } }[]) => {
          const failed = output?.find((o) => o.error || o.errorDetail);
          if (err) reject(err);
          else if (failed) reject(new DockerApiError(failed.errorDetail?.message ?? failed.error ?? 'pull failed', 500));
          else resolve();
        }),
      );
    });
  }

  create(opts: Docker.ContainerCreateOptions): Promise<string> {
    return this.call(async () => (await this.docker.createContainer(opts)).id);
  }

  start(id: string): Promise<void> {
    return this.call(async () => {
      try {
        await this.docker.getContainer(id).start();
      } catch (e) {
        if ((e as { statusCode?: number }).statusCode === 304) return; // already running
        throw e;
      }
    });
  }

  /**
   * Stops with the container's own StopSignal and StopTimeout (no `t`: Docker then uses the values
   * persisted at create, seed 001 #114). Already stopped or gone is fine.
   */
  async stop(id: string): Promise<void> {
    try {
      await this.call(() => this.docker.getContainer(id).stop());
    } catch (e) {
      const s = statusOf(e);
      if (s === 304 || s === 404) return;
      throw e;
    }
  }

  async remove(id: string): Promise<void> {
    try {
      // v: anonymous volumes go with the container; named volumes (data) are never removed.
      await this.call(() => this.docker.getContainer(id).remove({ v: true, force: true }));
    } catch (e) {
      const s = statusOf(e);
      if (s === 404 || (s === 409 && /already in progress/.test((e as Error).message))) return;
      throw e;
    }
  }

  /**
   * docker exec to the command's exit: the output is read and dropped (only the code counts). Past
   * timeoutMs the agent stops waiting and says so; the process is left to end in the container, like
   * Docker's own timed-out check, and the caller runs no further exec for that container.
   */
  async exec(id: string, cmd: string[], timeoutMs: number): Promise<number> {
    const ex = await this.call(() => this.docker.getContainer(id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true }));
    const stream = await this.call(() => ex.start({ hijack: true, stdin: false }));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => {
        stream.destroy();
        reject(new HealthExecTimeout(`health check did not exit within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(t);
        resolve();
      };
      stream.on('end', done);
      stream.on('close', done);
      stream.on('error', (e) => {
        clearTimeout(t);
        reject(dockerError(this.host, e));
      });
      stream.resume();
    });
    const info = await this.call(() => ex.inspect());
    return info.ExitCode ?? -1;
  }

  /** Docker's one-shot stats (the fallback when cgroup files are not readable). */
  async stats(id: string): Promise<CgroupUsage | undefined> {
    const s = await this.call(() => this.docker.getContainer(id).stats({ stream: false, 'one-shot': true }));
    return usageFromDockerStats(s);
  }

  /**
   * Opens the event stream of this agent's containers; onEvent gets the container id and the
   * action (start, die, destroy, health_status: …). `ended` resolves when the stream ends (Docker
   * went away) or the signal aborts.
   */
  async watchEvents(onEvent: (id: string, action: string) => void, signal: AbortSignal): Promise<{ ended: Promise<void> }> {
    const stream = (await this.call(() => this.docker.getEvents({ filters: { type: ['container'], label: ownerLabels(this.owner) } }))) as NodeJS.ReadableStream & {
      destroy?: () => void;
    };
    const ended = new Promise<void>((resolve) => {
      let buf = '';
      const done = () => {
        signal.removeEventListener('abort', abort);
        resolve();
      };
      const abort = () => {
        stream.destroy?.();
        done();
      };
      if (signal.aborted) return abort();
      signal.addEventListener('abort', abort, { once: true });
      stream.on('data', (d: Buffer) => {
        buf += d.toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          try {
            const ev = JSON.parse(line) as { id?: string; Action?: string; Actor?: { ID?: string } };
            const id = ev.Actor?.ID ?? ev.id;
            if (id && ev.Action) onEvent(id, ev.Action);
          } catch {
            // a torn line: the periodic resync covers whatever it was
          }
        }
      });
      stream.on('end', done);
      stream.on('close', done);
      stream.on('error', done);
    });
    return { ended };
  }
}
