#!/usr/bin/env node
// Bundles jaco (src/cli/main.ts and everything it imports, its npm packages included) into
// dist/bundle/: the code bin/jaco runs, for every command and every process a cluster starts
// (agents, controllers, ingresses). esbuild compiles the TypeScript as vitest does for the tests;
// `tsc --noEmit` (make test's typecheck) checks it. Part of the build (npm run build, which make
// build and scripts/test.sh run).
//
// Why: a process that loaded ~700 files one by one (Node resolves, reads and compiles each) spent
// 30-45 % of a short command's CPU on it (docs/benchmarks.md, "Then one file per command"). Commands
// stay lazily loaded: each is its own chunk (splitting).
//
// Left as packages, loaded from node_modules at run time: pino (its transports start workers by
// file path), dockerode (optional native modules through ssh2), and what jaco's code loads with
// createRequire (ajv for the precompiled validators, yaml's stringify): those calls are not bundled.
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ETCD3_POOL, withParsedProto } from './etcd3-proto.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BUNDLE_DIR = join(root, 'dist', 'bundle');

/**
 * CommonJS packages that find their own files through __dirname or __filename (etcd3 reads its
 * rpc.proto so; gRPC its channelz and orca protos): those names are given their original file's
 * place, relative to the bundle's at run time, so a moved install keeps working.
 */
const ownPlace = {
  name: 'own-place',
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, async (args) => {
      // etcd3's rpc.proto comes parsed at build time (scripts/etcd3-proto.mjs).
      if (args.path === ETCD3_POOL) return { contents: withParsedProto(await readFile(args.path, 'utf8')), loader: 'js' };
      const text = await readFile(args.path, 'utf8');
      if (!/\b__(dirname|filename)\b/.test(text)) return undefined;
      const rel = relative(BUNDLE_DIR, args.path).split('\\').join('/');
      const head = `var __filename = __jacoPlace(${JSON.stringify(rel)}), __dirname = __jacoDirname(__filename);`;
      return { contents: `${head}\n${text}`, loader: 'js' };
    });
  },
};

// Every chunk is an ES module; bundled CommonJS packages still call require() for Node's own
// modules, and the own-place plugin's helpers resolve against the chunk's URL.
const banner = [
  "import { createRequire as __jacoCreateRequire } from 'node:module';",
  "import { dirname as __jacoDirname } from 'node:path';",
  "import { fileURLToPath as __jacoFileURLToPath } from 'node:url';",
  'const require = __jacoCreateRequire(import.meta.url);',
  'const __jacoPlace = (rel) => __jacoFileURLToPath(new URL(rel, import.meta.url));',
].join(' ');

rmSync(BUNDLE_DIR, { recursive: true, force: true });
await build({
  entryPoints: { jaco: join(root, 'src', 'cli', 'main.ts') },
  outdir: BUNDLE_DIR,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['pino', 'dockerode'],
  plugins: [ownPlace],
  banner: { js: banner },
  // Every chunk beside the entry: the own-place paths are relative to the one directory.
  chunkNames: '[name]-[hash]',
  sourcemap: 'linked',
  sourcesContent: false,
  legalComments: 'none',
  logLevel: 'warning',
});
