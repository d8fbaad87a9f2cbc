// The ingress's HAProxy child against the real binary (Debian's haproxy): a frontend it cannot bind
// (a port another process holds; an address the machine lacks alike) is named by a BindError, at a
// start and at a reload alike, and a reload that fails leaves the old worker serving; a config
// without that frontend then loads. (The ingress's use of it, end to end: test/e2e/ingress.test.ts.)
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BindError, frontendName, HaproxyProcess, renderConfig, type Route } from '../../controllers/ingress/haproxy.js';
import { freePort } from '../../src/supervise/etcd.js';
import { testLogger } from '../support/log.js';

const route = (published: number, service: string, addresses?: string[]): Route => ({ published, deployment: 'd', service, portName: 'p', backend: `be_d_${service}_p`, mode: 'tcp', ...(addresses ? { addresses } : {}) });

/** A plain TCP listener answering "hi" (a backend, or a process holding a port), on a port of its own or the one given. */
async function listen(port = 0): Promise<Server & { port: number }> {
  const s = createServer((c) => c.end('hi'));
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', resolve);
  });
  return Object.assign(s, { port: (s.address() as { port: number }).port });
}

/** What a TCP connection to the port reads before the far end closes ('' on refusal). */
function read(port: number): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const c = connect(port, '127.0.0.1');
    c.on('data', (d) => (got += d.toString()));
    c.on('close', () => resolve(got));
    c.on('error', () => resolve(''));
  });
}

describe('HAProxy frontends that cannot bind', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-haproxy-bind-'));
  const procs: HaproxyProcess[] = [];
  const servers: Server[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) await p.stop();
    for (const s of servers.splice(0)) s.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('are named at a start (every one at once), and the config without them starts', async () => {
    const [backend, holder, holder2] = [await listen(), await listen(), await listen()];
    servers.push(backend, holder, holder2);
    const held = holder.port;
    const free = await freePort();
    const h = new HaproxyProcess(join(dir, 'start'), testLogger());
    procs.push(h);
    const routes = [route(held, 'a'), route(free, 'b'), route(holder2.port, 'c')].sort((a, b) => a.published - b.published);
    const servers1 = new Map(routes.map((r) => [r.backend, new Map([['s1', { addr: '127.0.0.1', port: backend.port }]])]));
    const cfg = (unbound?: Set<string>) => renderConfig({ socket: h.socket, address: '127.0.0.1', routes, servers: servers1, ...(unbound ? { unbound } : {}) });
    const e = await h.apply(cfg()).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(BindError);
    expect((e as BindError).failures).toEqual(
      [held, holder2.port].sort((a, b) => a - b).map((p) => ({ frontend: `fe_${p}`, address: `127.0.0.1:${p}`, reason: 'Address already in use' })),
    );
    await h.apply(cfg(new Set((e as BindError).failures.map((f) => f.frontend))));
    expect(await read(free)).toBe('hi');
    expect(await read(held)).toBe('hi'); // still the other process's
  });

  it('are named at a reload, while the old worker goes on serving', async () => {
    const backend = await listen();
    servers.push(backend);
    const first = await freePort();
    const h = new HaproxyProcess(join(dir, 'reload'), testLogger());
    procs.push(h);
    const srv = (routes: Route[]) => new Map(routes.map((r) => [r.backend, new Map([['s1', { addr: '127.0.0.1', port: backend.port }]])]));
    const one = [route(first, 'a')];
    await h.apply(renderConfig({ socket: h.socket, address: '127.0.0.1', routes: one, servers: srv(one) }));
    const pid = h.pid;
    const holder = await listen();
    servers.push(holder);
    const held = holder.port;
    const two = [...one, route(held, 'b')];
    const e = await h.apply(renderConfig({ socket: h.socket, address: '127.0.0.1', routes: two, servers: srv(two) })).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(BindError);
    expect((e as BindError).failures.map((f) => f.address)).toEqual([`127.0.0.1:${held}`]);
    expect(h.running && h.pid === pid).toBe(true);
    expect(await read(first)).toBe('hi');
    // Without it, the reload goes through; once the port is free, with it.
    await h.apply(renderConfig({ socket: h.socket, address: '127.0.0.1', routes: two, servers: srv(two), unbound: new Set([frontendName(two[1]!)]) }));
    expect(await read(first)).toBe('hi');
    holder.close();
    await h.apply(renderConfig({ socket: h.socket, address: '127.0.0.1', routes: two, servers: srv(two) }));
    expect(await read(held)).toBe('hi');
  });
});
