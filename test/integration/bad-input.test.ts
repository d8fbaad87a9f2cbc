// Bad input, generated: 1,200 mutations of valid manifests and compose files (wrong types,
// out-of-range numbers, unicode, deep nesting, huge strings, duplicate keys, anchors, aliases,
// tags, truncation) through the same code `jaco apply` runs — the reader, the compose loader and
// applyDeployments on a real etcd. Every one must end in a clear refusal that names the file, the
// line and (past YAML syntax) the field, or in a clean apply: 0 crashes, 0 partial writes.
// A sample also goes through the real CLI binary (exit 1, no stack trace). Seeded: a failure
// prints the seed and the mutation, and BAD_INPUT_SEED=N replays one.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isMap, isScalar, isSeq, parseDocument, type Node as YamlNode } from 'yaml';
import { ManifestError, parseManifests, readSources, type ManifestProblem } from '../../src/api/manifest.js';
import type { Deployment } from '../../src/api/types.js';
import { applyDeployments, deleteDeployments } from '../../src/app/apply.js';
import { composeSource, isComposeText, loadCompose } from '../../src/compose/load.js';
import { TooLargeError } from '../../src/store/errors.js';
import { jaco } from '../support/cli.js';
import { startTestEtcd, type TestEtcd } from '../support/etcd.js';
import { prng } from '../support/random.js';

const COUNT = 1_200;
const CLI_SAMPLE = 20;


const BASES = [
  `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: shop
  labels: {team: web}
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      replicas: 3
      command: [sh, -c]
      args: ["sleep 3600"]
      env: {GREETING: hello, LEVEL: info}
      resources: {cpu: 500m, memory: 64Mi}
      ports: [8080]
      healthcheck: {test: [CMD, "true"], interval: 2s, retries: 3}
      stopGracePeriod: 5s
      update: {order: start-first, maxUnavailable: 1}
    db:
      image: jaco-demo/busybox:1
      volumes: [{type: volume, source: data, target: /data}]
      placement: {mode: pack}
`,
  `services:
  web:
    image: jaco-demo/busybox:1
    command: sleep 3600
    environment: [A=1, B=two]
    # Container ports (compose services are on the cluster network), published nowhere: every
    # mutation is applied into one store, where two published alike would clash.
    ports: ["8080"]
    expose: ["9090"]
    deploy:
      replicas: 2
      resources: {limits: {cpus: "0.5", memory: 64M}}
    healthcheck: {test: ["CMD", "true"], interval: 2s}
    depends_on: {db: {condition: service_started}}
  db:
    image: jaco-demo/busybox:1
    volumes: ["data:/data"]
volumes:
  data: {}
`,
];

type Mutation = { name: string; text: string };

const WEIRD_VALUES: unknown[] = [null, true, -1, 0, 1.5, 1e21, -0.000001, '', ' ', '🚀🚀', 'ש\u200fלום', '\u0000', 'a'.repeat(300), [], [[[]]], {}, { x: { y: 1 } }, 'NaN', '-1', '10000001', '1Zi', '500mm', '∞'];

function nodesOf(doc: ReturnType<typeof parseDocument>): { parent: YamlNode; key: unknown }[] {
  const out: { parent: YamlNode; key: unknown }[] = [];
  const walk = (n: unknown) => {
    if (isMap(n))
      for (const p of n.items) {
        out.push({ parent: n, key: isScalar(p.key) ? p.key.value : p.key });
        walk(p.value);
      }
    else if (isSeq(n))
      n.items.forEach((x, i) => {
        out.push({ parent: n, key: i });
        walk(x);
      });
  };
  walk(doc.contents);
  return out;
}

function mutate(base: string, r: () => number): Mutation {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const lines = base.split('\n');
  const kind = Math.floor(r() * 10);
  switch (kind) {
    case 0:
    case 1:
    case 2: {
      // A value of the wrong type or out of range, anywhere in the tree.
      const doc = parseDocument(base);
      const at = pick(nodesOf(doc));
      const v = pick(WEIRD_VALUES);
      (at.parent as { set(k: unknown, v: unknown): void }).set(at.key, doc.createNode(v));
      return { name: `value ${JSON.stringify(at.key)} := ${JSON.stringify(v)?.slice(0, 40)}`, text: doc.toString() };
    }
    case 3: {
      // Deep nesting.
      const doc = parseDocument(base);
      const at = pick(nodesOf(doc));
      let v: unknown = 'x';
      for (let i = 0; i < 60 + Math.floor(r() * 200); i++) v = r() < 0.5 ? [v] : { k: v };
      (at.parent as { set(k: unknown, v: unknown): void }).set(at.key, doc.createNode(v));
      return { name: `deep nesting at ${JSON.stringify(at.key)}`, text: doc.toString() };
    }
    case 4: {
      // A huge string (past etcd's request size), as an env value or a name.
      const big = 'x'.repeat(r() < 0.5 ? 2_000_000 : 200_000);
      return { name: 'huge string', text: base.replace(r() < 0.5 ? 'hello' : 'jaco-demo/busybox:1', big) };
    }
    case 5: {
      // A duplicated line (duplicate keys) or a removed one.
      const i = 1 + Math.floor(r() * (lines.length - 2));
      const out = [...lines];
      if (r() < 0.5) out.splice(i, 0, lines[i]!);
      else out.splice(i, 1);
      return { name: `line ${i + 1} ${r() < 0.5 ? 'duplicated' : 'removed'}`, text: out.join('\n') };
    }
    case 6: {
      // Truncated at a random byte (an interrupted write), or a byte of garbage in it.
      const at = Math.floor(r() * base.length);
      return r() < 0.5 ? { name: `truncated at ${at}`, text: base.slice(0, at) } : { name: `garbage at ${at}`, text: base.slice(0, at) + pick(['{', ']', ':', '\t', '"', '&a', '*b', '!!', '%', '@', '\u00ff']) + base.slice(at) };
    }
    case 7: {
      // Anchors, aliases, an alias bomb, merge keys.
      const bomb = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n';
      const choice = pick(['bomb', 'undefined alias', 'merge']);
      if (choice === 'bomb') return { name: 'alias bomb', text: bomb + base };
      if (choice === 'undefined alias') return { name: 'undefined alias', text: base.replace(/: (\S+)\n/, ': *nowhere\n') };
      return { name: 'merge of a scalar', text: base.replace(/\n(\s+)image:/, '\n$1<<: 5\n$1image:') };
    }
    case 8: {
      // YAML tags jaco does not take.
      const tag = pick(['!!binary aGVsbG8=', '!!timestamp 2001-12-14', '!custom x', '!!set {a, b}', '!!float .inf', '!!int 0x1F']);
      return { name: `tag ${tag}`, text: base.replace(/(replicas|image): \S+/, `$1: ${tag}`) };
    }
    default: {
      // Unicode in names and keys.
      const u = pick(['Ünïcødé', 'web🚀', 'ווב', 'we\u200bb', 'WEB', 'a'.repeat(70)]);
      return { name: `unicode ${JSON.stringify(u)}`, text: base.replace(r() < 0.5 ? /\bweb\b/ : /\bshop\b|\bdb\b/, u) };
    }
  }
}

/** What a refusal must say: the file, a line, and a field unless the YAML itself is broken. */
function clear(p: ManifestProblem, file: string): string | undefined {
  if (p.file !== file) return `names ${p.file}, not ${file}`;
  if (!(p.line >= 1)) return 'has no line';
  // Past YAML syntax, a problem names the field (file-level ones — "contains no objects" — excepted).
  if (!p.path && p.rule !== 'yaml' && !/contains no objects|needs a name|also defined|must be a mapping/.test(p.message)) return 'names no field';
  if (!p.message || p.message.length > 2_000) return 'has no readable message';
  return undefined;
}

let etcd: TestEtcd;
const dir = mkdtempSync(join(tmpdir(), 'jaco-bad-input-'));
beforeAll(async () => {
  etcd = await startTestEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

describe(`${COUNT} generated broken manifests and compose files`, () => {
  it('each is refused clearly (file, line, field) or applied whole: no crash, no partial write', async () => {
    const store = etcd.store();
    const only = process.env.BAD_INPUT_SEED ? [Number(process.env.BAD_INPUT_SEED)] : Array.from({ length: COUNT }, (_, i) => i + 1);
    const counts = { refused: 0, applied: 0, tooLarge: 0 };
    for (const seed of only) {
      const r = prng(seed);
      const m = mutate(BASES[seed % BASES.length]!, r);
      const file = join(dir, `m${seed}.yaml`);
      writeFileSync(file, m.text);
      const what = `seed ${seed} (${m.name}): replay with BAD_INPUT_SEED=${seed}`;
      const revision = async () => Number((await store.header()).revision); // the store's revision: any write anywhere moves it
      const before = await revision();
      try {
        const [src] = readSources([file]);
        const items: { name: string; spec: Deployment['spec'] }[] = isComposeText(src!.text)
          ? [loadCompose(composeSource(file, src!.text), { env: {}, name: `c${seed}` }).deployment].map((d) => ({ name: d.metadata.name, spec: d.spec }))
          : parseManifests([src!], { kinds: ['Deployment'] }).map(({ object }) => ({ name: (object as Deployment).metadata.name, spec: (object as Deployment).spec }));
        const named = items.map((i) => ({ ...i, name: `${i.name}-${seed}`.slice(0, 40).replace(/-+$/, ''), cause: 'apply' as const }));
        await applyDeployments(store, named);
        counts.applied++;
        // Deleted again: every apply reads every deployment, and the store would otherwise grow by
        // a few hundred (some near the size limit), each read again by every later apply.
        await deleteDeployments(store, named.map((i) => i.name));
      } catch (e) {
        const after = await revision();
        expect(after, `${what}: a refused apply wrote something`).toBe(before);
        if (e instanceof ManifestError) {
          counts.refused++;
          expect(e.problems.length, what).toBeGreaterThan(0);
          for (const p of e.problems) expect(clear(p, file), `${what}: ${JSON.stringify(p)}`).toBeUndefined();
        } else if (e instanceof TooLargeError) counts.tooLarge++;
        else throw new Error(`${what}: crashed with ${(e as Error).stack}`);
      }
    }
    console.log(`[bad input] ${only.length} mutations: ${counts.refused} refused with file and line, ${counts.tooLarge} refused as too large, ${counts.applied} applied whole; 0 crashes, 0 partial writes`);
    expect(counts.refused + counts.tooLarge + counts.applied).toBe(only.length);
    expect(counts.refused).toBeGreaterThan(only.length / 2);
  }, 300_000);

  it(`${CLI_SAMPLE} of them through the real CLI: exit 1 or 0, never a stack trace`, async () => {
    const prefix = `/bad-cli-${process.pid}/`;
    for (let seed = 1; seed <= CLI_SAMPLE; seed++) {
      const m = mutate(BASES[seed % BASES.length]!, prng(seed * 7919));
      const file = join(dir, `cli${seed}.yaml`);
      writeFileSync(file, m.text);
      const r = await jaco(['apply', '-f', file, ...(isComposeText(m.text) ? ['--name', `cli${seed}`] : [])], { endpoint: etcd.endpoint, prefix });
      const what = `cli seed ${seed} (${m.name}): exit ${r.code}\n${r.stderr.slice(0, 600)}`;
      expect([0, 1], what).toContain(r.code);
      expect(r.stderr, what).not.toMatch(/\n\s+at \S+ \(|TypeError|RangeError|ReferenceError/);
      if (r.code === 1) expect(r.stderr, what).toMatch(/^error: /m);
    }
  }, 300_000);
});
