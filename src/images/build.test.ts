// The build context as the engine receives it (.dockerignore honoured as the Docker CLI does), and
// the reading of build and push streams (the real engine builds and pushes in test/e2e/images.test.ts).
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-fs';
import { afterAll, describe, expect, it } from 'vitest';
import { dockerAuthConfig } from './access.js';
import { buildOutcome, ImageBuildError, ImagePushError, packContext, pushOutcome, type StreamEvent } from './build.js';
import { ImageUnauthorizedError, RegistryUnreachableError } from './registry.js';

const root = mkdtempSync(join(tmpdir(), 'jaco-build-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function tree(files: Record<string, string>): string {
  const dir = join(root, `ctx${n++}`);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

/** Every path in the packed context (directories with a trailing /). */
async function packed(dir: string, dockerfile: { name: string; extra?: string } = { name: 'Dockerfile' }): Promise<string[]> {
  const out = join(root, `out${n++}`);
  await pipeline(packContext(dir, dockerfile), tar.extract(out));
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((f) => {
      const p = join(d, f);
      return statSync(p).isDirectory() ? [`${relative(out, p)}/`, ...walk(p)] : [relative(out, p)];
    });
  return walk(out).sort();
}

describe('packContext', () => {
  it('sends everything when there is no .dockerignore', async () => {
    expect(await packed(tree({ Dockerfile: 'FROM x', 'app/main.sh': 'echo', 'a.txt': 'a' }))).toEqual(['Dockerfile', 'a.txt', 'app/', 'app/main.sh']);
  });

  it('leaves out what .dockerignore names, keeps its exceptions, and always sends the Dockerfile and .dockerignore', async () => {
    const dir = tree({
      Dockerfile: 'FROM x',
      '.dockerignore': '# comment\n.dockerignore\nDockerfile\nsecret.txt\n*.log\nnode_modules\nbuild/**\n!build/keep.txt\n**/*.tmp\n',
      'secret.txt': 'nope',
      'debug.log': 'nope',
      'sub/deep.log': 'kept: *.log matches the root only',
      'node_modules/x/index.js': 'nope',
      'build/out.bin': 'nope',
      'build/keep.txt': 'kept by the exception',
      'src/a.tmp': 'nope',
      'src/main.c': 'int main(){}',
    });
    expect(await packed(dir)).toEqual(['.dockerignore', 'Dockerfile', 'build/', 'build/keep.txt', 'src/', 'src/main.c', 'sub/', 'sub/deep.log']);
  });

  it('keeps symlinks as links, and file modes as they are', async () => {
    const dir = tree({ Dockerfile: 'FROM x', 'run.sh': '#!/bin/sh' });
    symlinkSync('run.sh', join(dir, 'start.sh'));
    chmodSync(join(dir, 'run.sh'), 0o750);
    const out = join(root, `out${n++}`);
    await pipeline(packContext(dir, { name: 'Dockerfile' }), tar.extract(out, { umask: 0 } as tar.ExtractOptions));
    expect(lstatSync(join(out, 'start.sh')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(out, 'start.sh'))).toBe('run.sh');
    expect(statSync(join(out, 'run.sh')).mode & 0o777).toBe(0o750);
  });

  it('adds a Dockerfile from outside the context (or inline) under its own name', async () => {
    const dir = tree({ 'a.txt': 'a' });
    const files = await packed(dir, { name: '.dockerfile.abc', extra: 'FROM y\n' });
    expect(files).toEqual(['.dockerfile.abc', 'a.txt']);
  });

  it('refuses a context that is not a directory', () => {
    expect(() => packContext(join(root, 'missing'), { name: 'Dockerfile' })).toThrow(/the build context .*missing is not a directory/);
  });
});

describe('buildOutcome', () => {
  const ok: StreamEvent[] = [
    { stream: 'Step 1/2 : FROM jaco-demo/busybox:1\n' },
    { stream: ' ---> a354a70fd0d1\n' },
    { stream: 'Step 2/2 : RUN echo hi\n' },
    { stream: 'hi\n' },
    { aux: { ID: 'sha256:feed' } },
    { stream: 'Successfully built feed\n' },
  ];
  it('gives the image ID of a finished build', () => expect(buildOutcome(ok, 'app:1')).toBe('sha256:feed'));
  it('falls back to "Successfully built" from engines without aux', () => expect(buildOutcome([{ stream: 'Step 1/1 : FROM x\n' }, { stream: 'Successfully built 0123456789ab\n' }], 'app:1')).toBe('0123456789ab'));

  it('names the step a failed build stopped at, with the engine\'s words and the last output', () => {
    const failed: StreamEvent[] = [
      { stream: 'Step 1/3 : FROM jaco-demo/busybox:1\n' },
      { stream: 'Step 2/3 : RUN echo about to fail && exit 3\n' },
      { stream: ' ---> Running in 0123\n' },
      { stream: 'about to fail\n' },
      { errorDetail: { code: 3, message: "The command '/bin/sh -c echo about to fail && exit 3' returned a non-zero code: 3" }, error: 'ignored: errorDetail wins' },
    ];
    let err: ImageBuildError | undefined;
    try {
      buildOutcome(failed, 'app:1');
    } catch (e) {
      err = e as ImageBuildError;
    }
    expect(err).toBeInstanceOf(ImageBuildError);
    expect(err!.step).toBe('Step 2/3 : RUN echo about to fail && exit 3');
    expect(err!.message).toBe("building app:1 failed at Step 2/3 : RUN echo about to fail && exit 3: The command '/bin/sh -c echo about to fail && exit 3' returned a non-zero code: 3");
    expect(err!.output.slice(-1)).toEqual(['about to fail']);
  });

  it('says plainly when a build fails before any step', () => {
    expect(() => buildOutcome([{ error: 'dockerfile parse error line 1: unknown instruction: FORM' }], 'app:1')).toThrow(new ImageBuildError('app:1', 'dockerfile parse error line 1: unknown instruction: FORM', undefined, []));
  });
});

describe('pushOutcome', () => {
  const digest = `sha256:${'e'.repeat(64)}`;
  it('takes the digest from the aux message, or from the status line of older engines', () => {
    expect(pushOutcome([{ status: 'Pushed' }, { status: `1: digest: ${digest} size: 527` }, { aux: { Tag: '1', Digest: digest, Size: 527 } }], 'r/app:1', 'r')).toBe(digest);
    expect(pushOutcome([{ status: `1: digest: ${digest} size: 527` }], 'r/app:1', 'r')).toBe(digest);
  });
  it('throws the image codes for what the registry refused or could not be reached, ImagePushError otherwise', () => {
    expect(() => pushOutcome([{ errorDetail: { message: 'unauthorized: authentication required' } }], '127.0.0.1:5/app:1', '127.0.0.1:5')).toThrow(ImageUnauthorizedError);
    expect(() => pushOutcome([{ error: 'Get "http://127.0.0.1:5/v2/": dial tcp 127.0.0.1:5: connect: connection refused' }], '127.0.0.1:5/app:1', '127.0.0.1:5')).toThrow(RegistryUnreachableError);
    expect(() => pushOutcome([{ error: 'blob upload invalid' }], 'r/app:1', 'r')).toThrow(new ImagePushError('pushing r/app:1 to r failed: blob upload invalid'));
    expect(() => pushOutcome([{ status: 'Pushed' }], 'r/app:1', 'r')).toThrow('the engine reported no digest');
  });
});

describe('dockerAuthConfig', () => {
  it.each([
    ['127.0.0.1:5000', { username: 'u', password: 'p' }, { username: 'u', password: 'p', serveraddress: '127.0.0.1:5000' }],
    ['docker.io', { username: 'u', password: 'p' }, { username: 'u', password: 'p', serveraddress: 'https://index.docker.io/v1/' }],
    ['ghcr.io', { identityToken: 't' }, { identitytoken: 't', serveraddress: 'ghcr.io' }],
    ['reg.local', undefined, { serveraddress: 'reg.local' }],
  ] as const)('%s', (registry, creds, want) => expect(dockerAuthConfig(registry, creds)).toEqual(want));
});
