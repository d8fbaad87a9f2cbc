// The primitive the peer cut of the chaos run stands on: a proxy shared by several clients cuts
// only the connections one process dialled (told apart by connectionOf, from /proc), ending those
// open and refusing new ones, while another process's connections through it carry on.
import { execFile } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../support/proxy.js';
import { connectionOf } from './cluster.js';

const execFileP = promisify(execFile);
let echo: Server;
let proxy: TcpProxy;

beforeAll(async () => {
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  proxy = new TcpProxy((echo.address() as { port: number }).port);
  await proxy.start();
});
afterAll(async () => {
  await proxy.close();
  await new Promise((r) => echo.close(r));
});

/** One round trip through the proxy from this process: the echo, or 'cut'. */
function roundTrip(): Promise<string> {
  return new Promise((resolve) => {
    const s: Socket = connect(proxy.port, '127.0.0.1', () => s.write('x'));
    s.once('data', (d) => (resolve(d.toString()), s.end()));
    s.once('close', () => resolve('cut'));
    s.once('error', () => resolve('cut'));
  });
}

/** The same from another process. */
async function roundTripFromChild(): Promise<string> {
  const script = `const s=require('net').connect(${proxy.port},'127.0.0.1',()=>s.write('x'));s.on('data',d=>{process.stdout.write(d);s.end()});s.on('close',()=>process.exit(0));s.on('error',()=>process.exit(0))`;
  const { stdout } = await execFileP(process.execPath, ['-e', script], { timeout: 10_000 });
  return stdout || 'cut';
}

describe('a proxy cut for one process only', () => {
  it('ends and refuses that process’s connections; another process’s go on; healed, all go again', async () => {
    expect(await roundTrip()).toBe('x');
    const open = connect(proxy.port, '127.0.0.1');
    await new Promise((r) => open.once('connect', r));
    await new Promise((r) => setTimeout(r, 50)); // accepted by the proxy
    const closed = new Promise((r) => open.once('close', r));
    proxy.refuseFrom((client) => connectionOf(process.pid, client.remotePort!, proxy.port));
    await closed; // the open one was ended
    expect(await roundTrip()).toBe('cut');
    expect(await roundTripFromChild()).toBe('x');
    proxy.refuseFrom(undefined);
    expect(await roundTrip()).toBe('x');
  });

  it('connectionOf tells a connection’s process from another', async () => {
    const s = connect(proxy.port, '127.0.0.1');
    await new Promise((r) => s.once('connect', r));
    expect(connectionOf(process.pid, s.localPort!, proxy.port)).toBe(true);
    expect(connectionOf(process.ppid, s.localPort!, proxy.port)).toBe(false);
    expect(connectionOf(process.pid, s.localPort!, proxy.port + 1)).toBe(false);
    s.destroy();
  });
});
