#!/usr/bin/env node
// make test's last word on a failed tier: every failed case (file, name, the head of its error),
// read from vitest's JSON report. vitest prints a failure's text above a long summary; a run
// read from its end (CI's log tail) would otherwise show only the last failure, or none.
// Usage: node scripts/failure-recap.mjs REPORT.json TIER
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const [file, tier = 'tests'] = process.argv.slice(2);
let report;
try {
  report = JSON.parse(readFileSync(file, 'utf8'));
} catch (e) {
  console.error(`failure recap: no report of the ${tier} tier to read (${e.message})`);
  process.exit(0);
}
/** The first lines of an error: its message, and of its stack only the first frame in the project's own code. */
const head = (text, lines) => {
  const all = text.split('\n').filter((l) => l.trim());
  const frame = all.find((l) => /^\s*at /.test(l) && !l.includes('node_modules'));
  return [...all.filter((l) => !/^\s*at /.test(l)).slice(0, lines), ...(frame ? [frame.trim()] : [])].map((l) => `      ${l.slice(0, 300)}`).join('\n');
};
const out = [];
for (const f of report.testResults ?? []) {
  const name = relative(process.cwd(), f.name);
  const failed = (f.assertionResults ?? []).filter((a) => a.status === 'failed');
  // A file that failed with no failed case failed outside one (a hook, an import, a timeout).
  if (!failed.length && f.status === 'failed') out.push(`  ${name}\n${head(f.message || '(no message)', 6)}`);
  for (const a of failed) out.push(`  ${name} > ${a.fullName}\n${head((a.failureMessages ?? []).join('\n') || '(no message)', 6)}`);
}
console.error(`\n== make test: the ${tier} tier failed; ${out.length} failure(s), each with the head of its error:\n${out.join('\n')}`);
