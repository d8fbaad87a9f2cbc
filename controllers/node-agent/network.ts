// The agent's second door beside the container engine: a cluster-network replica's addresses in
// its sandbox's network namespace. On a real host it is the CNI ptp plugin (cni.ts); hollow nodes
// (no kernel namespace behind their containers) and tests use MemoryNetwork.
import type { ReplicaAddress } from '../../src/api/types.js';
import { canonicalCidr } from '../../src/api/network.js';

/** A ReplicaNetwork's failure: the plugin's own error, or it could not be run. The start retries with back-off. */
export class CniError extends Error {
  override name = 'CniError';
  readonly recoverable = true;
  constructor(
    message: string,
    /** The plugin's error code (CNI spec: 1–99 well-known, 100+ the plugin's own), when it gave one. */
    readonly code?: number,
  ) {
    super(message);
  }
}

/** A sandbox as the plugin addresses it: its container id and the pid whose namespace it holds. */
export interface SandboxNetns {
  id: string;
  pid: number;
}

export interface ReplicaNetwork {
  /** Gives the sandbox's namespace the addresses (CNI ADD); throws CniError when the plugin fails. */
  add(sb: SandboxNetns, address: ReplicaAddress): Promise<void>;
  /** Takes them away again, veth and routes with them (CNI DEL); a namespace already gone is fine. */
  del(sb: SandboxNetns, address: ReplicaAddress): Promise<void>;
  /** The global addresses the sandbox's interface holds, as CIDRs ([] when none). */
  addresses(sb: SandboxNetns): Promise<string[]>;
}

/** Addresses kept in memory by sandbox id: hollow nodes and tests. `fail` makes ADD fail with that message. */
export class MemoryNetwork implements ReplicaNetwork {
  readonly held = new Map<string, string[]>();
  fail?: string;
  adds = 0;

  async add(sb: SandboxNetns, address: ReplicaAddress): Promise<void> {
    if (this.fail) throw new CniError(`ptp ADD: ${this.fail}`);
    this.adds++;
    this.held.set(sb.id, [canonicalCidr(address.ipv4), canonicalCidr(address.ipv6)]);
  }

  async del(sb: SandboxNetns, _address?: ReplicaAddress): Promise<void> {
    this.held.delete(sb.id);
  }

  async addresses(sb: SandboxNetns): Promise<string[]> {
    return this.held.get(sb.id) ?? [];
  }
}
