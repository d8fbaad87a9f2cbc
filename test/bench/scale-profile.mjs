// Where a profiled process spent its time (see scale-cpuprof.cjs): self time by file and by
// function, and inclusive time by function, over the whole profile or a window counted back
// from its end (the last scenario a bench ran is the end of the profile):
//   node test/bench/scale-profile.mjs /tmp/prof/controller-123.cpuprofile [fromEndS toEndS]
import { readFileSync } from 'node:fs';

const [file, a, b] = process.argv.slice(2);
if (!file) throw new Error('usage: scale-profile.mjs <file.cpuprofile> [fromEndSeconds toEndSeconds]');
const p = JSON.parse(readFileSync(file, 'utf8'));
const from = a === undefined ? Infinity : Number(a) * 1e6;
const to = b === undefined ? 0 : Number(b) * 1e6;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const short = (url) => url.replace(/.*\/(node_modules\/[^/]+|dist\/)/, '$1');
const frame = (cf) => `${cf.functionName || '(anon)'} ${short(cf.url)}:${cf.lineNumber}`;
const self = new Map();
const total = new Map();
const byFile = new Map();
const add = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);
let t = p.startTime;
let count = 0;
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i];
  const fromEnd = p.endTime - t;
  if (fromEnd > from || fromEnd < to) continue;
  count++;
  const n = byId.get(p.samples[i]);
  add(self, frame(n.callFrame));
  add(byFile, short(n.callFrame.url) || n.callFrame.functionName);
  const seen = new Set();
  for (let id = n.id; id !== undefined; id = parent.get(id)) {
    const k = frame(byId.get(id).callFrame);
    if (!seen.has(k)) add(total, k);
    seen.add(k);
  }
}
const top = (m, k) =>
  [...m]
    .sort((x, y) => y[1] - x[1])
    .slice(0, k)
    .map(([name, v]) => `${((100 * v) / count).toFixed(1).padStart(5)} %  ${name}`)
    .join('\n');
console.log(`${count} samples over ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s`);
console.log(`--- self, by file\n${top(byFile, 15)}\n--- self\n${top(self, 25)}\n--- inclusive\n${top(total, 45)}`);
