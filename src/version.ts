// The jaco version, read once from package.json, and the commit of the build (dist/build-info.json,
// written by scripts/build-info.mjs; "unknown" when it is missing, as under vitest).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from './paths.js';

export const VERSION: string = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** The commit the running code was built from (with `-dirty` when built from uncommitted changes). */
export function buildCommit(): string {
  const file = join(PACKAGE_ROOT, 'dist', 'build-info.json');
  if (!existsSync(file)) return 'unknown';
  try {
    const commit = (JSON.parse(readFileSync(file, 'utf8')) as { commit?: unknown }).commit;
    return typeof commit === 'string' && commit ? commit : 'unknown';
  } catch {
    return 'unknown';
  }
}
