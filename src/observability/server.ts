// The HTTP endpoint of every long-running jaco process: /metrics (Prometheus text format) and
// /healthz. It binds to a loopback address by default.
import { createServer, type Server } from 'node:http';
import { registry } from './metrics.js';

export interface HealthSource {
  /** Extra detail for /healthz (e.g. which informers have synced, Docker reachable). */
  (): { ok: boolean; detail?: Record<string, unknown> };
}

/** Extra JSON endpoints a controller serves beside /metrics (e.g. the rebalancer's /rebalance/plan). */
export type JsonRoute = () => Promise<{ status: number; body: unknown }>;
export const jsonRoutes = new Map<string, JsonRoute>();

export function parseAddr(addr: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(addr);
  if (!m) throw new Error(`invalid address ${JSON.stringify(addr)}; use HOST:PORT, e.g. 127.0.0.1:9464`);
  return { host: m[1] || '127.0.0.1', port: Number(m[2]) };
}

/** Starts the endpoint; port 0 picks a free port (see the returned address). */
export async function serveObservability(addr: string, health: HealthSource = () => ({ ok: true })): Promise<{ server: Server; url: string }> {
  const { host, port } = parseAddr(addr);
  const server = createServer((req, res) => {
    if (req.url === '/metrics') {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        },
        (e: Error) => {
          res.writeHead(500);
          res.end(e.message);
        },
      );
    } else if (req.url === '/healthz') {
      const h = health();
      res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: h.ok, ...h.detail }));
    } else if (jsonRoutes.has(req.url?.split('?')[0] ?? '')) {
      jsonRoutes.get(req.url!.split('?')[0]!)!().then(
        ({ status, body }) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        },
        (e: Error) => {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: e.message }));
        },
      );
    } else {
      res.writeHead(404);
      res.end('not found: try /metrics or /healthz\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const a = server.address();
  const url = typeof a === 'object' && a ? `http://${host}:${a.port}` : `http://${addr}`;
  return { server, url };
}
