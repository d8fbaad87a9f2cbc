// A server leaving routing, against the real binary (Debian's haproxy), through the runtime API
// commands the ingress sends (controllers/ingress/decide.ts commandsOf): a connection still on a
// drained server is not cut when the drain period ends — HAProxy refuses the deletion (`held`), the
// connection carries on to its answer, and once it has ended the server is deleted. Past the drain
// limit the deletion cuts it. (Found by the app e2e: a slow request through the service address
// was cut 2 s after its replica left routing, and nginx answered 502.)
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { commandsOf, type RuntimeOp } from '../../controllers/ingress/decide.js';
import { HaproxyProcess, renderConfig, runtimeCommand, runtimeOk, SERVER_CHECK, type Route } from '../../controllers/ingress/haproxy.js';
import { freePort } from '../../src/supervise/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

/** A backend that answers each line it reads with "got <line>", holding the connection open until the client ends it. */
async function echo(): Promise<Server & { port: number }> {
  const s = createServer((c) => c.on('data', (d) => c.write(`got ${d.toString().trim()}\n`)));
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return Object.assign(s, { port: (s.address() as { port: number }).port });
}

/** A client connection through the frontend, with what it has read and whether it was closed under it. */
async function client(port: number): Promise<{ sock: Socket; said: () => string; closed: () => boolean; ask(line: string): Promise<string> }> {
  const sock = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  let got = '';
  let closed = false;
  sock.on('data', (d) => (got += d.toString()));
  sock.on('close', () => (closed = true));
  sock.on('error', () => undefined);
  return {
    sock,
    said: () => got,
    closed: () => closed,
    async ask(line) {
      const before = got.length;
      sock.write(`${line}\n`);
      await eventually(async () => got.length > before || closed, { what: `an answer to ${line}`, timeoutMs: 5000, intervalMs: 10 });
      return got.slice(before).trim();
    },
  };
}

describe('a drained server and the connections still on it (real HAProxy)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-haproxy-drain-'));
  const h = new HaproxyProcess(dir, testLogger());
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const send = async (o: RuntimeOp) => {
    let result: 'ok' | 'held' = 'ok';
    for (const c of commandsOf(o, SERVER_CHECK)) result = await runtimeOk(h.socket, c);
    return result;
  };

  it('is held while a connection is on it, deleted once it ended; past the limit the connection is cut', async () => {
    const backend = await echo();
    const published = await freePort();
    const route: Route = { published, deployment: 'd', service: 'db', portName: 'p', backend: 'be_d_db_p', mode: 'tcp' };
    await h.apply(renderConfig({ socket: h.socket, address: '127.0.0.1', routes: [route], servers: new Map([[route.backend, new Map()]]) }));
    const b = route.backend;
    try {
      expect(await send({ op: 'add', backend: b, server: 's1', addr: '127.0.0.1', port: backend.port })).toBe('ok');
      const slow = await client(published);
      expect(await slow.ask('one')).toBe('got one');

      // It leaves routing: drained, and at the end of the drain period the deletion is refused.
      expect(await send({ op: 'drain', backend: b, server: 's1' })).toBe('ok');
      expect(await send({ op: 'remove', backend: b, server: 's1' })).toBe('held');
      // The connection under way carries on (in maintenance the server gets no new one).
      expect(await slow.ask('two')).toBe('got two');
      expect(slow.closed()).toBe(false);
      expect(await runtimeCommand(h.socket, `show servers state ${b}`)).toContain(' s1 ');

      // It ends: the next try deletes the server.
      slow.sock.end();
      await eventually(async () => (await send({ op: 'remove', backend: b, server: 's1' })) === 'ok', { what: 's1 deleted', timeoutMs: 10_000, intervalMs: 100 });
      expect(await runtimeCommand(h.socket, `show servers state ${b}`)).not.toContain(' s1 ');

      // Past the drain limit: the connection still on it is cut, and the server goes.
      expect(await send({ op: 'add', backend: b, server: 's2', addr: '127.0.0.1', port: backend.port })).toBe('ok');
      const stuck = await client(published);
      expect(await stuck.ask('three')).toBe('got three');
      expect(await send({ op: 'drain', backend: b, server: 's2' })).toBe('ok');
      expect(await send({ op: 'remove', backend: b, server: 's2', cut: true })).toBe('ok');
      await eventually(async () => stuck.closed(), { what: 'the stuck connection cut', timeoutMs: 5000, intervalMs: 20 });
      expect(stuck.said()).toBe('got three\n');
    } finally {
      backend.close();
    }
  });
});
