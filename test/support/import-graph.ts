// The import graph of our own TypeScript files, read with TypeScript's own `preProcessFile` (every
// `import`, `import type` and `export … from`), and the cycles in it. Structure tests use it to keep
// a folder's orchestrator from becoming the home of helpers its parts import back (an import loop).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** File → the files it imports, both as paths relative to `root`. Only relative specifiers count. */
export type ImportGraph = Map<string, string[]>;

function tsFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) tsFiles(p, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts') && !name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

/** The module a relative specifier names (`./x.js` is `./x.ts`), or undefined outside the source. */
function resolveSpecifier(from: string, spec: string): string | undefined {
  const base = resolve(dirname(from), spec);
  const stem = base.replace(/\.(js|ts)$/, '');
  for (const c of [`${stem}.ts`, join(base, 'index.ts')]) if (existsSync(c)) return c;
  return undefined;
}

/** The graph of every non-test .ts file under `dirs` (relative to `root`). */
export function importGraph(root: string, dirs: readonly string[]): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const d of dirs) {
    for (const file of tsFiles(join(root, d))) {
      const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, false);
      const to = new Set<string>();
      for (const i of info.importedFiles) {
        if (!i.fileName.startsWith('.')) continue;
        const r = resolveSpecifier(file, i.fileName);
        if (r) to.add(relative(root, r));
      }
      graph.set(relative(root, file), [...to].sort());
    }
  }
  return graph;
}

/** Strongly connected components of more than one file (or a file importing itself): each is a loop. */
export function importLoops(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out.sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
}

/** One concrete cycle inside a loop (a → b → … → a), to name in a failure. */
export function oneCycle(graph: ImportGraph, loop: readonly string[]): string[] {
  const inLoop = new Set(loop);
  const start = loop[0]!;
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!inLoop.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = prev.get(u)!) path.splice(1, 0, u);
        return [...path, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/** Elementary cycles through the loop's files, counted up to `cap` (a measure of how tangled it is). */
export function countCycles(graph: ImportGraph, loop: readonly string[], cap = 100_000): number {
  const nodes = [...loop].sort();
  let count = 0;
  // Each cycle counted once, from its smallest file: only files after the start are walked.
  for (let s = 0; s < nodes.length && count < cap; s++) {
    const allowed = new Set(nodes.slice(s));
    const start = nodes[s]!;
    const onPath = new Set<string>([start]);
    const walk = (v: string) => {
      for (const w of graph.get(v) ?? []) {
        if (count >= cap) return;
        if (w === start) count++;
        else if (allowed.has(w) && !onPath.has(w)) {
          onPath.add(w);
          walk(w);
          onPath.delete(w);
        }
      }
    };
    walk(start);
  }
  return count;
}

// `npx tsx test/support/import-graph.ts [ROOT]`: every loop of src/ and controllers/, its size and
// how many elementary cycles run through it (the figure issue 31 reports before and after).
if (process.argv[1] && resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const root = resolve(process.argv[2] ?? '.');
  const graph = importGraph(root, ['src', 'controllers']);
  const loops = importLoops(graph);
  for (const l of loops) console.log(`${l.length} files, ${countCycles(graph, l)} cycles: ${l.join(' ')}\n  e.g. ${oneCycle(graph, l).join(' → ')}`);
  console.log(`${loops.length} loops`);
}
