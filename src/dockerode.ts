// dockerode, loaded on first use: most jaco commands never talk to Docker, and loading it at start
// cost every CLI command ~0.1 s.
import { createRequire } from 'node:module';
import type Docker from 'dockerode';

let loaded: typeof Docker | undefined;

/** The dockerode client class. */
export function dockerode(): typeof Docker {
  return (loaded ??= createRequire(import.meta.url)('dockerode') as typeof Docker);
}

type Demux = (stream: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream) => void;
let demux: Demux | undefined;

/**
 * docker-modem's demultiplexer of Docker's stdout/stderr stream (the one dockerode uses; taken from
 * dockerode's own dependency): for a stream an agent passed through from Docker.
 */
export function demuxStream(stream: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): void {
  demux ??= (() => {
    const req = createRequire(createRequire(import.meta.url).resolve('dockerode'));
    const Modem = req('docker-modem') as { prototype: { demuxStream: Demux } };
    return Modem.prototype.demuxStream;
  })();
  demux(stream, stdout, stderr);
}
