#!/usr/bin/env node
// Bundles the dashboard's page (web/dashboard, with uPlot) into dist/web/dashboard.{js,css}: the
// files `jaco dashboard` serves itself. Part of the build (make build, scripts/test.sh).
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
await build({
  entryPoints: { dashboard: join(root, 'web/dashboard/main.ts') },
  outdir: join(root, 'dist/web'),
  bundle: true,
  minify: true,
  sourcemap: true,
  format: 'iife',
  target: ['chrome110', 'firefox110', 'safari16'],
  logLevel: 'warning',
});
