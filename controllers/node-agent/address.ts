// The address a node's replicas are reached at: `jaco agent --address`, by default the IPv4
// address of the interface the default route leaves by (/proc/net/route), else loopback.
import { readFileSync } from 'node:fs';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

/** The interface of the default route in /proc/net/route's text, or undefined. */
export function defaultRouteInterface(routeTable: string): string | undefined {
  for (const line of routeTable.split('\n').slice(1)) {
    const [iface, destination, , , , , , mask] = line.trim().split(/\s+/);
    if (iface && destination === '00000000' && mask === '00000000') return iface;
  }
  return undefined;
}

/** The first IPv4 address of `iface` among the host's interfaces. */
export function interfaceAddress(iface: string | undefined, ifaces: NodeJS.Dict<NetworkInterfaceInfo[]>): string | undefined {
  if (!iface) return undefined;
  return ifaces[iface]?.find((a) => a.family === 'IPv4')?.address;
}

export function defaultAddress(): string {
  let table = '';
  try {
    table = readFileSync('/proc/net/route', 'utf8');
  } catch {
    // Not Linux, or no procfs: loopback.
  }
  return interfaceAddress(defaultRouteInterface(table), networkInterfaces()) ?? '127.0.0.1';
}
