// The CLI's side of the agents' logs and exec endpoint (controllers/node-agent/api-server.ts):
// HTTPS straight to the node's agent at the endpoint its Node publishes, presenting the
// operator's certificate and accepting only the certificate the cluster CA issued to that node.
import { request, Agent, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import type { Node } from '../api/types.js';
import { nodeCommonName, readTlsDir, type TlsMaterial } from '../pki/identity.js';
import { defaultClientTlsDir } from './commands/cert.js';
import { CliError } from './common.js';
import { splitHostPort } from '../api/network.js';

/** How long to wait for a node's agent to answer before calling it unreachable. */
const CONNECT_TIMEOUT_MS = 5000;

export const TLS_DIR_HELP = "the operator's certificate: ca.pem, cert.pem, cert.key (env JACO_TLS_DIR; default .jaco/pki/operator, else ~/.jaco/tls)";

/** The operator's TLS directory: --tls-dir, JACO_TLS_DIR, .jaco/pki/operator, ~/.jaco/tls. */
export function clientTls(flag: string | undefined): TlsMaterial {
  const dir = flag ?? process.env.JACO_TLS_DIR ?? defaultClientTlsDir();
  try {
    return readTlsDir(dir, 'the operator certificate (--tls-dir, JACO_TLS_DIR)');
  } catch (e) {
    throw new CliError((e as Error).message);
  }
}

/** A node's agent could not be reached or refused the connection: named, with what to check. */
export class AgentUnreachableError extends CliError {
  override name = 'AgentUnreachableError';
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EADDRNOTAVAIL', 'EPIPE']);

export interface AgentTarget {
  node: string;
  endpoint: string;
  host: string;
  port: number;
}

/** Where a node's agent serves logs and exec, from its Node. */
export function agentTarget(node: Node | undefined, name: string): AgentTarget {
  if (!node) throw new CliError(`node ${name} is not registered`);
  const endpoint = node.status?.api?.endpoint;
  if (!endpoint) throw new CliError(`node ${name} publishes no logs and exec endpoint: its agent runs without its node certificate (jaco cert node ${name} --ip <address>; docs/operate.md)`);
  const hp = splitHostPort(endpoint);
  if (!hp) throw new CliError(`node ${name} publishes a malformed endpoint ${JSON.stringify(endpoint)}`);
  return { node: name, endpoint, ...hp };
}

export class AgentClient {
  private readonly agent: Agent;

  constructor(private readonly tls: TlsMaterial) {
    this.agent = new Agent({ keepAlive: true, ca: tls.ca, cert: tls.cert, key: tls.key });
  }

  close(): void {
    this.agent.destroy();
  }

  private options(t: AgentTarget, method: string, path: string, headers: Record<string, string> = {}): RequestOptions {
    return {
      host: t.host,
      port: t.port,
      method,
      path,
      headers,
      agent: this.agent,
      ca: this.tls.ca,
      cert: this.tls.cert,
      key: this.tls.key,
      // The address the Node publishes must be in the certificate, and the certificate must be that node's.
      checkServerIdentity: (host: string, cert: PeerCertificate) => {
        const err = checkServerIdentity(host, cert);
        if (err) return err;
        const want = nodeCommonName(t.node);
        return cert.subject?.CN === want ? undefined : new Error(`the certificate at ${t.endpoint} is ${cert.subject?.CN}, not ${want}`);
      },
    };
  }

  /**
   * What went wrong reaching a node, as the operator needs to hear it. `secured`: the TLS handshake
   * had completed on our side — a reset then is the agent refusing our certificate (TLS 1.3 checks
   * the client's after the client considers itself connected).
   */
  failure(t: AgentTarget, e: unknown, secured = false): CliError {
    if (e instanceof CliError) return e;
    const err = e as NodeJS.ErrnoException;
    if (/alert|certificate/i.test(err.message) || (secured && err.code === 'ECONNRESET'))
      return new AgentUnreachableError(`node ${t.node}: its agent at https://${t.endpoint} refused this certificate (${err.code ?? err.message}): it must be a client certificate from the cluster CA, operator:<name> or viewer:<name> (docs/operate.md)`);
    if (err.code && NETWORK_CODES.has(err.code)) return new AgentUnreachableError(`node ${t.node} is unreachable: its agent's logs and exec endpoint https://${t.endpoint} did not answer (${err.code}); is the agent running, and does this machine reach ${t.host}?`);
    return new AgentUnreachableError(`node ${t.node}: the connection to its agent at https://${t.endpoint} failed: ${err.message}`);
  }

  /** Sends a request; resolves to a 2xx response (others become a CliError with the agent's message). */
  async call(t: AgentTarget, method: string, path: string, body?: unknown): Promise<IncomingMessage> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(this.options(t, method, path, payload ? { 'Content-Type': 'application/json' } : {}), resolve);
      let secured = false;
      req.on('socket', (s) => s.once('secureConnect', () => (secured = true)));
      req.setTimeout(CONNECT_TIMEOUT_MS, () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
      req.on('response', () => req.setTimeout(0));
      req.on('error', (e) => reject(this.failure(t, e, secured)));
      req.end(payload);
    });
    if (res.statusCode! >= 200 && res.statusCode! < 300) return res;
    throw new CliError(`node ${t.node}: ${await messageOf(res)}`);
  }

  async json<T>(t: AgentTarget, method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.call(t, method, path, body);
    return JSON.parse(await text(res)) as T;
  }

  /** An HTTP upgrade to Docker's raw stream (Upgrade: tcp): the socket, and the bytes already read. */
  upgrade(t: AgentTarget, path: string): Promise<{ socket: Socket; head: Buffer; contentType: string }> {
    return new Promise((resolve, reject) => {
      // Its own connection (no keep-alive agent): the socket becomes the session's.
      const opts = { ...this.options(t, 'POST', path, { Connection: 'Upgrade', Upgrade: 'tcp' }), agent: false as const };
      const req = request(opts);
      let secured = false;
      req.on('socket', (s) => s.once('secureConnect', () => (secured = true)));
      req.setTimeout(CONNECT_TIMEOUT_MS, () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
      req.on('upgrade', (res: IncomingMessage, socket: Socket, head: Buffer) => {
        req.setTimeout(0);
        socket.setTimeout(0);
        resolve({ socket, head, contentType: String(res.headers['content-type'] ?? '') });
      });
      req.on('response', (res: IncomingMessage) => void messageOf(res).then((m) => reject(new CliError(`node ${t.node}: ${m}`))));
      req.on('error', (e) => reject(this.failure(t, e, secured)));
      req.end();
    });
  }
}

async function text(res: IncomingMessage): Promise<string> {
  let s = '';
  for await (const chunk of res as AsyncIterable<Buffer>) s += chunk.toString();
  return s;
}

async function messageOf(res: IncomingMessage): Promise<string> {
  const body = await text(res);
  try {
    return (JSON.parse(body) as { message?: string }).message ?? `HTTP ${res.statusCode}`;
  } catch {
    return `HTTP ${res.statusCode}: ${body.slice(0, 200)}`;
  }
}
