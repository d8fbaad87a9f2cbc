// The installable package (issue 32): what `npm pack` makes of the built tree, unpacked where
// nothing else is, runs on its own — the jaco command, the compiled code, the dashboard's assets,
// the compose schema, its runtime dependencies bundled (an operator's host installs it with
// `npm install -g jaco-VERSION.tgz`, offline) and none of the development ones. The dashboard
// answering 500 because its assets were never built is what this catches.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { uniquePrefix } from '../support/etcd.js';
import { installJaco, packedJaco } from '../support/package.js';

const run = promisify(execFile);
const etcd = useTestEtcd();
const VERSION = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('the npm package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-package-'));
  const pkg = join(dir, 'lib', 'node_modules', 'jaco');
  let files: string[] = [];
  const jacoIn = (args: string[], env: Record<string, string> = {}) => run(process.execPath, [join(dir, 'bin', 'jaco'), ...args], { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 });

  beforeAll(async () => {
    // The tree make test built (dist/), packed as it is, installed where nothing else is.
    files = (await packedJaco()).files;
    await installJaco(dir);
  }, 180_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('holds the command, the compiled code, the web assets and the runtime dependencies, and nothing of development', () => {
    for (const f of ['bin/jaco', 'dist/bundle/jaco.js', 'dist/web/dashboard.js', 'dist/web/dashboard.css', 'dist/build-info.json', 'src/compose/compose-spec.json', 'package.json', 'README.md'])
      expect(files, f).toContain(f);
    // The schemas compiled at build time, both modes of every kind (src/api/schema.ts).
    expect(files.filter((f) => /^dist\/validators\/(read|write)-[A-Za-z]+-[0-9a-f]{16}\.cjs$/.test(f)).length).toBeGreaterThan(40);
    for (const dep of Object.keys((JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies))
      expect(files.some((f) => f.startsWith(`node_modules/${dep}/`)), `runtime dependency ${dep} bundled`).toBe(true);
    // (@types/* may come as a runtime dependency's own: @kubernetes/client-node lists three.)
    const dev = files.filter((f) => /^node_modules\/(typescript|vitest|@vitest\/[^/]+|esbuild|tsx|testcontainers|playwright-core|@types\/(dockerode|shell-quote|tar-fs|dns-packet))\//.test(f));
    expect(dev).toEqual([]);
    // The command runs the bundle (scripts/build-bundle.mjs): the compiled modules it was made from are the build's, not the package's.
    expect(files.filter((f) => /^dist\/(src|controllers)\//.test(f))).toEqual([]);
    // Of jaco's own: no tests, no TypeScript sources, no local state.
    expect(files.filter((f) => !f.startsWith('node_modules/') && /\.test\.js$|^(test|web)\/|^(src|controllers)\/.*\.ts$|^\.jaco\//.test(f))).toEqual([]);
  });

  it('jaco version: the package version and the commit it was built from', async () => {
    const head = (await run('git', ['rev-parse', 'HEAD'], { cwd: PACKAGE_ROOT, encoding: 'utf8' })).stdout.trim();
    const v = JSON.parse((await jacoIn(['version', '-o', 'json'])).stdout) as { version: string; commit: string };
    expect(v.version).toBe(VERSION);
    expect(v.commit).toMatch(new RegExp(`^${head}(-dirty)?$`));
    expect((await jacoIn(['version'])).stdout).toBe(`jaco ${VERSION} (commit ${v.commit}, node ${process.version})\n`);
  });

  it('reads a compose file with its own schema, reads the store, and serves the dashboard with its assets', async () => {
    const converted = await jacoIn(['convert', '-f', join(pkg, 'examples', 'shop')]);
    expect(converted.stdout).toMatch(/^kind: Deployment$/m);
    // The bundled etcd client finds its protocol's definition where the package put it.
    const read = await jacoIn(['get', 'deployments'], { JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: uniquePrefix() });
    expect([read.stdout, read.stderr]).toEqual(['', 'No resources found.\n']);

    const child = spawn(process.execPath, [join(pkg, 'bin', 'jaco'), 'dashboard', '--addr', '127.0.0.1:0'], { cwd: dir, env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: uniquePrefix() }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /jaco dashboard: (\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.on('exit', (code) => reject(new Error(`jaco dashboard exited ${code}: ${err}`)));
      });
      const page = await fetch(url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('/assets/dashboard.js');
      for (const asset of ['dashboard.js', 'dashboard.css']) {
        const r = await fetch(new URL(`/assets/${asset}`, url));
        expect(r.status, asset).toBe(200);
        expect((await r.text()).length, asset).toBeGreaterThan(1000);
      }
    } finally {
      child.kill('SIGTERM');
    }
  });
});
