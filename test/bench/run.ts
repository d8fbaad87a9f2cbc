// Runs benchmarks: every test/bench/*.bench.ts in turn, or those whose name contains an argument.
//   npx tsx test/bench/run.ts            # all
//   npx tsx test/bench/run.ts placement  # only *placement*.bench.ts
// Each benchmark is a standalone script that prints its figures; docs/benchmarks.md records them.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => !filters.length || filters.some((x) => f.includes(x)))
  .sort();
let failed = 0;
for (const f of files) {
  console.log(`\n### ${f}`);
  const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(dir, f)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
if (!files.length) console.log('no benchmark matched');
process.exit(failed ? 1 : 0);
