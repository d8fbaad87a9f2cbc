// A loopback TCP proxy that a test can cut and restore: a real network partition between one
// client and etcd, without touching etcd itself.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private server?: Server;
  private sockets = new Set<Socket>();
  private paused = false;
  port = 0;

  constructor(private readonly targetPort: number) {}

  async start(): Promise<string> {
    this.server = createServer((client) => {
      if (this.paused) return client.destroy();
      const upstream = connect(this.targetPort, '127.0.0.1');
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
  }
}
