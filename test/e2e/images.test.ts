// Images with the real Docker engine and a real registry on 127.0.0.1 (which Docker treats as
// insecure, so plain HTTP): a compose-style build (COPY, RUN on the host network, ARG, a
// multi-stage target, a .dockerignore'd file) pushed and resolved to the same digest; a failing step named; a local image
// pushed; and the engine's own pull errors classified into the image codes.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type Docker from 'dockerode';
import tar from 'tar-fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAndPush, buildImage, ImageBuildError, pushImage, pushLocalImage } from '../../src/images/build.js';
import { classifyPullError, ImageUnauthorizedError, resolveDigest } from '../../src/images/registry.js';
import { freePort } from '../../src/supervise/etcd.js';
import { requireDocker } from '../support/cluster.js';
import { startTestRegistry, type TestRegistry } from '../support/registry.js';

// PROBE_URL is a server of the test on 127.0.0.1: a RUN step reaches it only with host networking.
const DOCKERFILE = `FROM jaco-demo/busybox:1 AS base
ARG GREETING=hello
ARG PROBE_URL
COPY app/ /app/
RUN echo "$GREETING from the build" > /app/greeting && L=$(ls /app) && echo "$L" > /app/listing
RUN wget -q -O /app/probe "$PROBE_URL"

FROM base AS final
RUN echo final > /app/stage

FROM base AS other
RUN echo other > /app/stage
`;

describe('building, pushing and resolving with the real engine', () => {
  let docker: Docker;
  let reg: TestRegistry;
  let locked: TestRegistry;
  let dir: string;
  const images: string[] = [];
  const containers: Docker.Container[] = [];

  beforeAll(async () => {
    docker = await requireDocker();
    reg = await startTestRegistry();
    locked = await startTestRegistry({ users: { ci: 'pushpw' } });
    dir = mkdtempSync(join(tmpdir(), 'jaco-e2e-images-'));
  });
  afterAll(async () => {
    for (const c of containers) await c.remove({ force: true }).catch(() => undefined);
    for (const i of images) await docker.getImage(i).remove({ force: true }).catch(() => undefined);
    await reg?.stop();
    await locked?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The files of /app in an image, read from a container that is created and never started. */
  async function appFiles(image: string): Promise<Record<string, string>> {
    const c = await docker.createContainer({ Image: image, Cmd: ['true'], HostConfig: { NetworkMode: 'none' } });
    containers.push(c);
    const out = mkdtempSync(join(dir, 'out-'));
    await pipeline((await c.getArchive({ path: '/app' })) as NodeJS.ReadableStream, tar.extract(out));
    const files: Record<string, string> = {};
    for (const f of ['greeting', 'stage', 'listing', 'probe', 'hello.txt', 'secret.txt']) if (existsSync(join(out, 'app', f))) files[f] = readFileSync(join(out, 'app', f), 'utf8').trim();
    return files;
  }

  it('builds a multi-stage target with args, leaves the .dockerignored file out, pushes, and the pushed digest is what resolveDigest finds', async () => {
    const ctx = join(dir, 'ctx');
    mkdirSync(join(ctx, 'app'), { recursive: true });
    writeFileSync(join(ctx, 'Dockerfile'), DOCKERFILE);
    writeFileSync(join(ctx, 'app', 'hello.txt'), 'hello from the context\n');
    writeFileSync(join(ctx, 'app', 'secret.txt'), 'must not reach the image\n');
    writeFileSync(join(ctx, '.dockerignore'), 'app/secret.txt\n');
    const target = `${reg.host}/e2e/app:1`;
    images.push(target);
    const output: string[] = [];
    const probe = createServer((_req, res) => res.end('reached over the host network\n'));
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const probeUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/`;
    const built = await buildAndPush(docker, { context: ctx, args: { GREETING: 'bonjour', PROBE_URL: probeUrl }, target: 'final' }, target, undefined, { onOutput: (l) => output.push(l) }).finally(() => probe.close());
    expect(built.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(built.pinned).toBe(`${target}@${built.digest}`);
    expect(output.some((l) => l.startsWith('Step 1/'))).toBe(true);
    expect(await resolveDigest(target, { insecure: true })).toBe(built.digest);
    expect((await docker.getImage(target).inspect()).Id).toBe(built.imageId);
    expect(await appFiles(target)).toEqual({ greeting: 'bonjour from the build', stage: 'final', listing: 'greeting\nhello.txt', probe: 'reached over the host network', 'hello.txt': 'hello from the context' });
  });

  it('names the step a failing build stopped at', async () => {
    const ctx = join(dir, 'failing');
    mkdirSync(ctx, { recursive: true });
    writeFileSync(join(ctx, 'Dockerfile'), 'FROM jaco-demo/busybox:1\nRUN echo about to fail && exit 3\nRUN echo never\n');
    const tag = `${reg.host}/e2e/failing:1`;
    images.push(tag);
    const err = await buildImage(docker, { context: ctx }, tag).then(
      () => undefined,
      (e: unknown) => e as ImageBuildError,
    );
    expect(err).toBeInstanceOf(ImageBuildError);
    expect(err!.step).toBe('Step 2/3 : RUN echo about to fail && exit 3');
    expect(err!.reason).toBe("The command '/bin/sh -c echo about to fail && exit 3' returned a non-zero code: 3");
    expect(err!.output).toContain('about to fail');
  });

  it('pushes an image the engine already has (make up pushes the demo images)', async () => {
    const target = `${reg.host}/jaco-demo/busybox:1`;
    images.push(target);
    const digest = await pushLocalImage(docker, 'jaco-demo/busybox:1', target);
    expect(await resolveDigest(target, { insecure: true })).toBe(digest);
  });

  it('pushes to a registry with users only with credentials; the pull errors of the engine classify as the image codes', async () => {
    const target = `${locked.host}/e2e/locked:1`;
    images.push(target);
    await docker.getImage('jaco-demo/busybox:1').tag({ repo: `${locked.host}/e2e/locked`, tag: '1' });
    await expect(pushImage(docker, target)).rejects.toBeInstanceOf(ImageUnauthorizedError);
    const digest = await pushImage(docker, target, { username: 'ci', password: 'pushpw' });
    expect(await resolveDigest(target, { insecure: true, credentials: { username: 'ci', password: 'pushpw' } })).toBe(digest);

    // The engine's own words for a failed pull, provoked for real, read by classifyPullError.
    const pullError = async (image: string, authconfig?: Docker.AuthConfig): Promise<string> => {
      try {
        const stream = await docker.pull(image, authconfig ? { authconfig } : {});
        const events = await new Promise<{ error?: string }[]>((res, rej) => docker.modem.followProgress(stream, (e: Error | null, out: { error?: string }[]) => (e ? rej(e) : res(out))));
        const failed = events.find((e) => e.error);
        if (failed) return failed.error!;
      } catch (e) {
        return (e as Error).message;
      }
      throw new Error(`pulling ${image} succeeded`);
    };
    const closed = `127.0.0.1:${await freePort()}/nothing:1`;
    const cases: [string, Docker.AuthConfig | undefined, string][] = [
      [`${reg.host}/e2e/app:nope`, undefined, 'image_not_found'],
      [`${reg.host}/never/pushed:1`, undefined, 'image_not_found'],
      [target, undefined, 'image_unauthorized'],
      [target, { username: 'ci', password: 'wrong', serveraddress: locked.host }, 'image_unauthorized'],
      [closed, undefined, 'registry_unreachable'],
    ];
    for (const [image, auth, code] of cases) {
      const message = await pullError(image, auth);
      expect(classifyPullError(message), `${image}: ${message}`).toBe(code);
    }
  });
});
