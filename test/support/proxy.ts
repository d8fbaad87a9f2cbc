// A loopback TCP proxy that a test can cut and restore: a real network partition between one
// client and etcd, without touching etcd itself. It also fronts a unix socket (Docker's), so one
// node-agent can lose its Docker engine while the engine stays up for everyone else.
import { rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private server?: Server;
  private sockets = new Set<Socket>();
  private paused = false;
  port = 0;
  private listenPath?: string;

  /** target: a loopback TCP port, or the path of a unix socket. */
  constructor(private readonly target: number | string) {}

  /** Listens on a free loopback port (http://127.0.0.1:PORT), or on a unix socket (unix://PATH). */
  async start(listenPath?: string): Promise<string> {
    this.server = createServer((client) => {
      if (this.paused) return client.destroy();
      const upstream = typeof this.target === 'number' ? connect(this.target, '127.0.0.1') : connect(this.target);
      this.sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    if (listenPath) {
      this.listenPath = listenPath;
      rmSync(listenPath, { force: true });
      await new Promise<void>((r) => this.server!.listen(listenPath, () => r()));
      return `unix://${listenPath}`;
    }
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
    return `http://127.0.0.1:${this.port}`;
  }

  /** Cuts every connection and refuses new ones. */
  pause(): void {
    this.paused = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  resume(): void {
    this.paused = false;
  }

  async close(): Promise<void> {
    this.pause();
    await new Promise<void>((r) => this.server?.close(() => r()) ?? r());
    if (this.listenPath) rmSync(this.listenPath, { force: true });
  }
}
