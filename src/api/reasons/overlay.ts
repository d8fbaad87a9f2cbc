// The overlay's closed vocabularies (controllers/node-agent/overlay*.ts): why a node is no peer of
// this one, and why this node's overlay is not up. The same strings appear in the agent's
// /healthz detail, its logs and its metrics' labels (docs/networking.md, "Between nodes: the WireGuard overlay").

/** Why another node is not configured as a peer. */
export const PEER_SKIPS = {
  no_overlay: 'its agent publishes no overlay key and endpoint (Node.status.overlay): an agent without --overlay, or older than the overlay',
  no_subnets: 'it has no subnets of the cluster network yet (subnets/<node>): nothing to route to it',
  bad_key: 'its published public key is not a WireGuard key (32 bytes, base64)',
  bad_endpoint: 'its published endpoint is not address:port (an IPv6 address in brackets)',
  bad_subnets: 'its subnets are not an IPv4 and an IPv6 CIDR',
  duplicate_key: 'another node (first by name) publishes the same public key: WireGuard takes one peer per key',
  own_key: "it publishes this node's own public key (a copied state directory?)",
} as const;
export type PeerSkip = keyof typeof PEER_SKIPS;

/** Why this node's overlay is not up (the agent's /healthz detail, overlay.reason). */
export const OVERLAY_DOWN = {
  not_observed: 'the interface has not been looked at yet',
  no_interface: 'the WireGuard interface does not exist (being made, or its wireguard-go exited)',
  not_wireguard: 'an interface of that name exists and is not WireGuard: the agent leaves it alone (choose another --overlay-interface)',
  key_not_set: "the interface does not hold this node's key and port yet",
  peers_missing: 'some nodes that should be peers are not configured, or their subnets are not routed over the interface',
} as const;
export type OverlayDown = keyof typeof OVERLAY_DOWN;
