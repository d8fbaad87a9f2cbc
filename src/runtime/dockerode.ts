// dockerode, loaded on first use: most jaco commands never talk to Docker, and loading it at start
// cost every CLI command ~0.1 s.
import { createRequire } from 'node:module';
import type Docker from 'dockerode';

let loaded: typeof Docker | undefined;

/** The dockerode client class. */
export function dockerode(): typeof Docker {
  return (loaded ??= createRequire(import.meta.url)('dockerode') as typeof Docker);
}
