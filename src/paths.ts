// Where the installed package lives, whether running from dist/ (built) or src/ (tests via vitest).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the jaco package root (no package.json above this module)');
    dir = up;
  }
  return dir;
}

export const PACKAGE_ROOT = findRoot();
export const CRDS_DIR = join(PACKAGE_ROOT, 'crds');
export const EXAMPLES_DIR = join(PACKAGE_ROOT, 'examples');
