#!/usr/bin/env node
// Writes dist/build-info.json: the commit the build was made from (`jaco version` prints it, so
// an operator can tell which code a host runs). Part of the build (make build, npm run build,
// scripts/test.sh, npm pack). Outside a git checkout, or with git missing, the commit is unknown.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
let commit = 'unknown';
try {
  commit = git('rev-parse', 'HEAD');
  // Built with changes not committed: say so, the commit alone would not name the code.
  if (git('status', '--porcelain', '--untracked-files=no')) commit += '-dirty';
} catch {
  // not a checkout (a package built elsewhere): unknown
}
mkdirSync(join(root, 'dist'), { recursive: true });
writeFileSync(join(root, 'dist', 'build-info.json'), `${JSON.stringify({ commit }, null, 2)}\n`);
