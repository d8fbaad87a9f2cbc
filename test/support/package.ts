// The installable package (issue 32) as tests use it: `npm pack` of the built tree, made once per
// build (the integration tier's package test and the e2e tier's deploy walk share it), and
// installed the way `npm install -g --prefix PREFIX jaco-VERSION.tgz` lays it out — unpacked, its
// runtime dependencies bundled, nothing fetched (no registry is reachable from here, and none may be).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/paths.js';

const run = promisify(execFile);

export interface Packed {
  /** The tarball. */
  file: string;
  /** The paths it holds. */
  files: string[];
}

/** The package of the tree as built (dist/), packed once per build: keyed by when dist/build-info.json was written. */
export async function packedJaco(): Promise<Packed> {
  const built = statSync(join(PACKAGE_ROOT, 'dist', 'build-info.json')).mtimeMs;
  const dir = join(tmpdir(), `jaco-pack-${Math.round(built)}`);
  const index = join(dir, 'packed.json');
  if (!existsSync(index)) {
    const scratch = mkdtempSync(join(tmpdir(), 'jaco-packing-'));
    // --ignore-scripts: prepack would build the tree again; it is packed as the tests built it.
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], { cwd: PACKAGE_ROOT, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 120_000 });
    const [p] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    writeFileSync(join(scratch, 'packed.json'), JSON.stringify({ file: p!.filename, files: p!.files.map((f) => f.path) }));
    try {
      renameSync(scratch, dir);
    } catch {
      rmSync(scratch, { recursive: true, force: true }); // another worker packed it meanwhile
    }
    // Earlier builds' packages go (14 MB each) once a day old (another checkout's run may be using its own).
    for (const old of readdirSync(tmpdir()).filter((f) => f.startsWith('jaco-pack-')).map((f) => join(tmpdir(), f)))
      if (old !== dir && (statSync(old, { throwIfNoEntry: false })?.mtimeMs ?? Infinity) < Date.now() - 86_400_000) rmSync(old, { recursive: true, force: true });
  }
  const p = JSON.parse(readFileSync(index, 'utf8')) as { file: string; files: string[] };
  return { file: join(dir, p.file), files: p.files };
}

/** Installs the package under `prefix` as `npm install -g --prefix` does (lib/node_modules/jaco, bin/jaco linked to it); returns bin/jaco. */
export async function installJaco(prefix: string): Promise<string> {
  const { file } = await packedJaco();
  const into = join(prefix, 'lib', 'node_modules', 'jaco');
  mkdirSync(into, { recursive: true });
  await run('tar', ['xzf', file, '-C', into, '--strip-components=1']);
  mkdirSync(join(prefix, 'bin'), { recursive: true });
  const bin = join(prefix, 'bin', 'jaco');
  if (!existsSync(bin)) symlinkSync('../lib/node_modules/jaco/bin/jaco', bin);
  return bin;
}
