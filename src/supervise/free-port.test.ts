// freePort: a port outside the kernel's ephemeral range (outgoing connections cannot take it
// between the check and the bind) that is free when it answers.
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FREE_PORTS, freePort, portInUse } from './etcd.js';

const held: Server[] = [];
afterEach(async () => {
  await Promise.all(held.splice(0).map((s) => new Promise((r) => s.close(r))));
});
const hold = (port: number) =>
  new Promise<void>((resolve, reject) => {
    const s = createServer();
    held.push(s);
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve());
  });

describe('freePort', () => {
  it('answers a free port of its range, never one of the ephemeral range', async () => {
    const [lo] = (await import('node:fs')).readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    expect(FREE_PORTS.max).toBeLessThan(lo!);
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      expect(port).toBeGreaterThanOrEqual(FREE_PORTS.min);
      expect(port).toBeLessThanOrEqual(FREE_PORTS.max);
      expect(await portInUse(port)).toBe(false);
    }
  });

  it('passes over a port in use', async () => {
    // The first draw lands on a port held here; the second on the one after it.
    let first = FREE_PORTS.min;
    while (await portInUse(first)) first++;
    await hold(first);
    const draws = [(first - FREE_PORTS.min) / (FREE_PORTS.max - FREE_PORTS.min + 1), (first + 1 - FREE_PORTS.min + 0.5) / (FREE_PORTS.max - FREE_PORTS.min + 1)];
    const port = await freePort(() => draws.shift() ?? Math.random());
    expect(port).not.toBe(first);
    expect(await portInUse(port)).toBe(false);
  });
});
