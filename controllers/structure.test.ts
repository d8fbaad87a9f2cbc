// Import loops: a folder's orchestrator that is also the home of helpers its parts import back (the
// shape issue 31 removed from controllers/scheduler). Every folder of controllers/ and src/ is held
// free of them (issue 31 untangled the last ones): a loop through a folder, even by way of another
// one, fails here and is named.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importGraph, importLoops, oneCycle } from '../test/support/import-graph.js';

const ROOT = new URL('../', import.meta.url).pathname;

describe('import graph of controllers/ and src/', () => {
  const graph = importGraph(ROOT, ['src', 'controllers']);
  const loops = importLoops(graph);
  const folders = [...new Set([...graph.keys()].map((f) => dirname(f)))].sort();

  it('reads the files and their imports', () => {
    // Guards the check itself: an empty graph would be acyclic too.
    expect(graph.get('controllers/scheduler/decide.ts')).toContain('controllers/scheduler/pass.ts');
    expect(folders).toContain('controllers/scheduler');
  });

  it.each(folders)('no import cycle through %s', (folder) => {
    const through = loops.filter((l) => l.some((f) => dirname(f) === folder));
    expect(through.map((l) => oneCycle(graph, l).join(' → '))).toEqual([]);
  });
});

describe('layers: the operator tools reach the controllers only through src/app', () => {
  // src/cli and src/dashboard (the operator's tools) → src/app (what they read and ask of the
  // cluster: read models, plan previews, decisions, the controllers' faces app/controllers.ts and
  // app/processes.ts) → controllers/ → the core (src/api, store, runtime, …). An arrow never runs
  // back up, and the tools never reach past the app into controllers/ (docs/runtime.md, "Layers").
  const graph = importGraph(ROOT, ['src', 'controllers']);
  const layer = (f: string): string => {
    if (f.startsWith('controllers/')) return 'controllers';
    const m = /^src\/(cli|dashboard|app|supervise)\//.exec(f);
    return m ? m[1]! : 'core';
  };
  const arrows = [...graph].flatMap(([from, to]) => to.map((t) => ({ from, to: t, a: layer(from), b: layer(t) })));
  const NEVER: Record<string, string[]> = {
    cli: ['controllers'],
    dashboard: ['controllers', 'cli'],
    app: ['cli', 'dashboard'],
    supervise: ['cli', 'dashboard'],
    controllers: ['app', 'cli', 'dashboard', 'supervise'],
    core: ['app', 'cli', 'dashboard', 'supervise', 'controllers'],
  };
  it('the layers are read', () => {
    expect(new Set(arrows.map((x) => x.a))).toEqual(new Set(['cli', 'dashboard', 'app', 'supervise', 'controllers', 'core']));
    expect(arrows.some((x) => x.a === 'app' && x.b === 'controllers')).toBe(true);
  });

  it.each(Object.keys(NEVER))('%s imports none of the layers above it or past src/app', (a) => {
    expect(arrows.filter((x) => x.a === a && NEVER[a]!.includes(x.b)).map((x) => `${x.from} → ${x.to}`)).toEqual([]);
  });
});

describe('what ships: src/ and controllers/ are compiled into dist', () => {
  const graph = importGraph(ROOT, ['src', 'controllers']);
  it('hold no test helper (a fixture lives in test/support)', () => {
    expect([...graph.keys()].filter((f) => f.endsWith('.fixture.ts'))).toEqual([]);
  });
  it('import nothing from test/', () => {
    const shipped = [...graph].filter(([f]) => !f.endsWith('.test.ts'));
    expect(shipped.length).toBeGreaterThan(100);
    expect(shipped.flatMap(([f, to]) => to.filter((t) => t.startsWith('test/')).map((t) => `${f} → ${t}`))).toEqual([]);
  });
});

describe('importLoops', () => {
  const g = (edges: Record<string, string[]>) => new Map(Object.entries(edges));
  it.each([
    ['a chain', { a: ['b'], b: ['c'], c: [] }, []],
    ['two files importing each other', { a: ['b'], b: ['a'] }, [['a', 'b']]],
    ['a file importing itself', { a: ['a'] }, [['a']]],
    ['a loop of three beside a chain', { a: ['b'], b: ['c'], c: ['a', 'd'], d: [] }, [['a', 'b', 'c']]],
  ])('%s', (_name, edges, loops) => {
    expect(importLoops(g(edges))).toEqual(loops);
  });

  it('names one cycle of a loop in import order', () => {
    expect(oneCycle(g({ a: ['b'], b: ['c'], c: ['a'] }), ['a', 'b', 'c'])).toEqual(['a', 'b', 'c', 'a']);
  });
});

describe('what the docs cite', () => {
  // A path a page or a code comment names (controllers/…, src/…, test/…, docs/…) must exist: a file
  // moved or renamed leaves its old name behind in prose, where no compiler looks (issue 31).
  const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
  const texts = tracked.filter((f) => /\.(md|ts|mjs|sh)$/.test(f) || f === 'Makefile');
  const ROOTED = /\b(?:controllers|src|test|scripts|deploy|crds|docs|web)\/[A-Za-z0-9_./@-]*[A-Za-z0-9_@-]/g;

  it('the pages and comments are read', () => {
    expect(texts.filter((f) => f.endsWith('.md')).length).toBeGreaterThan(10);
  });

  it('names only files and folders that exist', () => {
    const missing: string[] = [];
    for (const f of texts) {
      const lines = readFileSync(join(ROOT, f), 'utf8').split('\n');
      const prose = f.endsWith('.md') ? () => true : (line: string) => /^\s*(\/\/|\*|\/\*\*|#)/.test(line);
      lines.forEach((line, i) => {
        if (!prose(line)) return;
        for (const m of line.matchAll(ROOTED)) {
          const p = m[0];
          // Part of a longer path (node_modules/…, /sys/fs/cgroup/…, a URL) or a pattern, not a file of ours.
          const before = line[m.index - 1];
          if (before === '/' || before === '.' || /[*<]/.test(line.slice(m.index, m.index + p.length + 1))) continue;
          // A test file may be named without its suffix (test/e2e/rollout-etcd).
          const exists = ['', '.ts', '.test.ts', '.md'].some((ext) => existsSync(join(ROOT, p + ext)) || existsSync(join(ROOT, dirname(f), p + ext)));
          if (!exists) missing.push(`${f}:${i + 1}: ${p}`);
        }
      });
    }
    expect(missing).toEqual([]);
  });
});
