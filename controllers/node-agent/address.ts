// The address a node's replicas are reached at: `jaco agent --address`, by default the IPv4
// address of the interface the default route leaves by (/proc/net/route); on a host with no default
// route (an air-gapped one), its one other address; loopback only when it has no other.
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

/**
 * The address to publish when there is no default route: the first non-loopback IPv4 address by
 * interface name (the same on every start), skipping the interfaces jaco makes itself (the overlay,
 * replicas' veths) — loopback would tell every other node to reach this one at their own.
 */
export function onlyAddress(ifaces: NodeJS.Dict<NetworkInterfaceInfo[]>, own: (iface: string) => boolean): string | undefined {
  for (const name of Object.keys(ifaces).sort()) {
    if (own(name)) continue;
    const a = ifaces[name]?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return undefined;
}

export function defaultAddress(own: (iface: string) => boolean = () => false): string {
  let table = '';
  try {
    table = readFileSync('/proc/net/route', 'utf8');
  } catch {
    // Not Linux, or no procfs: loopback.
  }
  const ifaces = networkInterfaces();
  return interfaceAddress(defaultRouteInterface(table), ifaces) ?? onlyAddress(ifaces, own) ?? '127.0.0.1';
}
