// What the ingress e2e test and benchmark share: simulated nodes' addresses, the demo httpd
// service published on an ingress, a `jaco ingress` process, its HAProxy's backend counters, and
// a bounded request loop (loopback only) that records what failed and what answered.
import { join } from 'node:path';
import { parseStat, runtimeCommand, type ServerStat } from '../../controllers/ingress/haproxy.js';
import type { Proc, TestCluster } from './cluster.js';

/** A simulated node's address: node-N at 127.0.1.N. */
export const nodeAddress = (node: string) => `127.0.1.${node.split('-')[1]}`;

export interface HttpdServiceOptions {
  deployment: string;
  image: string;
  published: number;
  replicas?: number;
  /** What the page says (shell, expanded in the container); the replica and revision by default. */
  page?: string;
  /** Extra conditions before the health check's request (shell), e.g. `test ! -f /tmp/sick`. */
  healthGuard?: string;
  /** Extra lines of the service spec (indented by the caller's 6 spaces). */
  extra?: string;
  /**
   * Docker's health check interval (default 5s: each exec check costs ~0.1 s of CPU, and a new
   * replica is ready at its first check anyway: the agent runs it itself). Shorter where a test
   * waits for a check to start failing.
   */
  healthInterval?: string;
}

/** A Deployment of one busybox httpd service `web` on `$JACO_NODE_ADDRESS:$PORT` (a dynamic port), published on every ingress. */
export function httpdManifest(o: HttpdServiceOptions): string {
  const check = `${o.healthGuard ? `${o.healthGuard} && ` : ''}wget -q -O /dev/null "http://$JACO_NODE_ADDRESS:$PORT/"`;
  return `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: ${o.deployment} }
spec:
  services:
    web:
      image: ${o.image}
      replicas: ${o.replicas ?? 3}
      placement: { mode: spread }
      ports:
        - { name: http, containerPort: 80, published: ${o.published} }
      ${o.extra ?? ''}
      command: [sh, -c]
      args:
        - >-
          trap "exit 0" TERM;
          mkdir -p /tmp/www;
          echo "${o.page ?? '$JACO_REPLICA r$JACO_REVISION'}" > /tmp/www/index.html;
          httpd -f -p "$JACO_NODE_ADDRESS:$PORT" -h /tmp/www & wait
      healthcheck:
        test: [CMD-SHELL, '${check}']
        interval: ${o.healthInterval ?? '5s'}
        timeout: 5s
        retries: 3
      stopGracePeriod: 5s
`;
}

/** Starts `jaco ingress` for a node, its HAProxy under `<logDir>/ingress/<node>`. */
export function startIngress(c: TestCluster, node: string, extra: string[] = []): Proc {
  return c.spawn(`ingress-${node}`, ['ingress', '--node', node, '--data-dir', join(c.logDir, 'ingress'), '--metrics-addr', '127.0.0.1:0', '--no-service-addresses', ...extra]);
}

/** The runtime API socket of a node's ingress HAProxy (as startIngress lays it out). */
export const ingressSocket = (c: TestCluster, node: string) => join(c.logDir, 'ingress', node, 'haproxy.sock');

/** A backend's own row of `show stat` (its totals: errors, retries and redispatches). */
export async function backendStat(socket: string, backend: string): Promise<ServerStat> {
  const row = parseStat(await runtimeCommand(socket, 'show stat')).find((s) => s.server === 'BACKEND' && s.backend === backend);
  if (!row) throw new Error(`no backend ${backend} in show stat`);
  return row;
}

/**
 * A bounded request loop: `concurrency` sequential loops against `url` until stopped or `max`
 * requests are sent in all. A failure is a non-200 answer (with its body: what the
 * server said went wrong) or a network error, each with the time it was sent (to read beside the
 * cluster's logs); `seen` holds the bodies of the answers (trimmed).
 */
export function requestLoop(url: string, max: number, concurrency = 1) {
  let stop = false;
  let sent = 0;
  const failures: string[] = [];
  const seen = new Set<string>();
  const loop = async () => {
    while (!stop && sent < max) {
      sent++;
      const at = new Date().toISOString();
      try {
        // A bound on a hang (a dropped or black-holed connection), not on speed: an answer that
        // comes is not a failure however slow the loaded machine made it (the app e2e's requests go
        // through nginx, a CGI, redis and postgres beside the containers' exec health checks).
        const r = await fetch(url, { signal: AbortSignal.timeout(15_000) });
        const body = (await r.text()).trim();
        if (r.status !== 200) failures.push(`${at} HTTP ${r.status} ${body.slice(0, 300)}`.trimEnd());
        else seen.add(body);
      } catch (e) {
        failures.push(`${at} ${(e as Error).message}`);
      }
    }
  };
  const done = Promise.all(Array.from({ length: concurrency }, loop));
  return {
    async stop() {
      stop = true;
      await done;
      return { sent, failures, seen };
    },
  };
}
