// Debian's Prometheus, run by a test with the configuration an operator is given
// (deploy/prometheus/prometheus.yml and its rules, verbatim but for a 1 s scrape interval) and
// target files naming the test cluster's processes: what an operator's Prometheus would see.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freePort } from '../../src/supervise/etcd.js';
import { eventually } from './wait.js';

const DEPLOY = join(PACKAGE_ROOT, 'deploy', 'prometheus');

/** host:port of each kind of jaco process, as deploy/prometheus/targets/ lists them. */
export interface ScrapeTargets {
  controllers: string[];
  agents: string[];
  ingresses: string[];
}

export interface Sample {
  metric: Record<string, string>;
  value: number;
}

export class TestPrometheus {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {}

  static async start(targets: ScrapeTargets): Promise<TestPrometheus> {
    const dir = mkdtempSync(join(tmpdir(), 'jaco-prometheus-'));
    const config = parse(readFileSync(join(DEPLOY, 'prometheus.yml'), 'utf8')) as { global: Record<string, string> };
    config.global.scrape_interval = '1s';
    config.global.evaluation_interval = '1s';
    writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
    copyFileSync(join(DEPLOY, 'jaco-rules.yml'), join(dir, 'jaco-rules.yml'));
    mkdirSync(join(dir, 'targets'));
    for (const [file, list] of [['controllers', targets.controllers], ['agents', targets.agents], ['ingresses', targets.ingresses]] as const)
      writeFileSync(join(dir, 'targets', `${file}.yml`), stringify([{ targets: list }]));
    const port = await freePort();
    let log = '';
    const child = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
    const p = new TestPrometheus(`http://127.0.0.1:${port}`, child, dir);
    await eventually(async () => (await fetch(`${p.url}/-/ready`).catch(() => undefined))?.ok === true, { what: `prometheus ready (log: ${log})`, timeoutMs: 30_000 });
    return p;
  }

  /** An instant query's vector. */
  async query(q: string): Promise<Sample[]> {
    const r = (await (await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(q)}`)).json()) as { status: string; error?: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
    if (r.status !== 'success') throw new Error(`prometheus query ${q}: ${r.error}`);
    return r.data.result.map((s) => ({ metric: s.metric, value: Number(s.value[1]) }));
  }

  /** The scrape targets by job, with their health. */
  async targets(): Promise<{ job: string; instance: string; health: string }[]> {
    const r = (await (await fetch(`${this.url}/api/v1/targets`)).json()) as { data: { activeTargets: { labels: { job: string; instance: string }; health: string }[] } };
    return r.data.activeTargets.map((t) => ({ job: t.labels.job, instance: t.labels.instance, health: t.health }));
  }

  /** The loaded rules' names with their health. */
  async rules(): Promise<{ name: string; health: string }[]> {
    const r = (await (await fetch(`${this.url}/api/v1/rules`)).json()) as { data: { groups: { rules: { name: string; health: string }[] }[] } };
    return r.data.groups.flatMap((g) => g.rules.map((x) => ({ name: x.name, health: x.health })));
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
