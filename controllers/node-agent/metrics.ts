// The node-agent's Prometheus metrics (jaco_agent_*), on the process registry. Label values are
// the closed vocabularies of src/api/reasons/agent.ts.
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../../src/observability/metrics.js';

const registers = [registry];

export const agentMetrics = {
  dockerUp: new Gauge({ name: 'jaco_agent_docker_up', help: '1 while the Docker engine answers, 0 while it does not', registers }),
  containers: new Gauge({ name: 'jaco_agent_containers', help: "This agent's containers by Docker state", labelNames: ['state'], registers }),
  pressure: new Gauge({ name: 'jaco_agent_pressure', help: "The node's latest utilisation sample (the whole host in node mode, its containers over capacity in containers mode)", labelNames: ['dimension'], registers }),
  earlyHealthChecks: new Counter({
    name: 'jaco_agent_early_health_checks_total',
    help: "The agent's own first health checks of new containers, by result (passed, failed, gave_up: timed out or exec refused)",
    labelNames: ['result'],
    registers,
  }),
  probeChecks: new Counter({
    name: 'jaco_agent_health_probes_total',
    help: "Health checks the agent runs itself against its replicas (healthcheck.http, healthcheck.tcp), by kind and result (passed, failed)",
    labelNames: ['kind', 'result'],
    registers,
  }),
  imagePulls: new Counter({ name: 'jaco_agent_image_pulls_total', help: 'Image pull attempts by result (success, failure)', labelNames: ['result'], registers }),
  starts: new Counter({ name: 'jaco_agent_starts_total', help: 'Container starts by result (started, start_failed, invalid_spec, cancelled)', labelNames: ['result'], registers }),
  stops: new Counter({ name: 'jaco_agent_stops_total', help: 'Containers stopped or removed, by reason', labelNames: ['reason'], registers }),
  commands: new Counter({ name: 'jaco_agent_commands_total', help: 'Replica commands executed, by op', labelNames: ['op'], registers }),
  malformedDesired: new Counter({ name: 'jaco_agent_malformed_desired_total', help: 'Desired keys of this node that were malformed or not meant for it (observed as failed, invalid_spec)', registers }),
  sampleDuration: new Histogram({
    name: 'jaco_agent_sample_duration_seconds',
    help: 'Time to sample the pressure of all running containers',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  }),
  sampleFallbacks: new Counter({ name: 'jaco_agent_sample_fallbacks_total', help: "Container readings taken through Docker's stats API because cgroup files were not readable", registers }),
  nodeReregistrations: new Counter({
    name: 'jaco_agent_node_reregistrations_total',
    help: 'Times nodes/<node> was found gone with no removal recorded (the store restored or wiped, a hand delete) and the agent registered the node again, keeping its containers',
    registers,
  }),
  clockSkew: new Gauge({ name: 'jaco_agent_clock_skew_seconds', help: "How far this node's clock is ahead of the controllers' clock beacon (negative: behind), as last measured", registers }),
  heartbeatFailures: new Counter({ name: 'jaco_agent_heartbeat_failures_total', help: 'Heartbeat writes that failed (etcd unreachable)', registers }),
  cni: new Counter({ name: 'jaco_agent_cni_calls_total', help: 'CNI plugin calls for cluster-network sandboxes, by command (ADD, DEL) and result (ok, failed)', labelNames: ['command', 'result'], registers }),
  apiRequests: new Counter({ name: 'jaco_agent_api_requests_total', help: 'Requests to the logs and exec endpoint by action (logs, exec) and result (ok, forbidden)', labelNames: ['action', 'result'], registers }),
  observedWrites: new Counter({ name: 'jaco_agent_observed_writes_total', help: 'observed/<node>/<replica> writes by result (ok, failed)', labelNames: ['result'], registers }),
};

/** The node's DNS server (dns.ts): label values are src/api/reasons/dns.ts's vocabularies. */
export const dnsMetrics = {
  queries: new Counter({
    name: 'jaco_agent_dns_queries_total',
    help: 'DNS queries by transport (udp, tcp), question type (A, AAAA, …, other, none) and outcome (answered, nodata, nxdomain, forwarded, servfail, rejected, malformed)',
    labelNames: ['transport', 'type', 'outcome'],
    registers,
  }),
  truncated: new Counter({ name: 'jaco_agent_dns_truncated_total', help: 'UDP answers too large for the client, sent with the TC bit and no records (it asks again over TCP)', registers }),
  forwardDuration: new Histogram({
    name: 'jaco_agent_dns_forward_duration_seconds',
    help: 'Forwarded queries, from the question to the upstream answer (every upstream tried, a retry over TCP included), by result (forwarded, servfail)',
    labelNames: ['outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers,
  }),
  upstreamFailures: new Counter({ name: 'jaco_agent_dns_upstream_failures_total', help: 'Upstream resolvers that did not answer a forwarded query, by reason (timeout, error, bad_answer, declined)', labelNames: ['reason'], registers }),
  names: new Gauge({ name: 'jaco_agent_dns_names', help: "Names in the DNS server's table", registers }),
};

/** The node's end of the WireGuard mesh (overlay.ts): label `peer` is a node name (bounded by the cluster's size). */
export const overlayMetrics = {
  up: new Gauge({ name: 'jaco_agent_overlay_up', help: "1 while the overlay interface holds this node's key and every peer it should, with their subnets routed over it; 0 otherwise", registers }),
  peers: new Gauge({ name: 'jaco_agent_overlay_peers', help: 'Peers this node should have (expected) and has, configured and routed (configured)', labelNames: ['state'], registers }),
  handshakeAge: new Gauge({ name: 'jaco_agent_overlay_handshake_age_seconds', help: "Seconds since the latest WireGuard handshake with a peer (absent until its first; above 180 the peer is not answering)", labelNames: ['peer'], registers }),
  transfer: new Gauge({ name: 'jaco_agent_overlay_transfer_bytes', help: "Bytes received from (rx) and sent to (tx) a peer through the tunnel, as WireGuard counts them (they restart when the peer is configured again)", labelNames: ['peer', 'direction'], registers }),
  steps: new Counter({ name: 'jaco_agent_overlay_steps_total', help: 'Steps carried out on the overlay interface, by op (create, wg, ip) and result (ok, failed)', labelNames: ['op', 'result'], registers }),
  userspaceExits: new Counter({ name: 'jaco_agent_overlay_wireguard_go_exits_total', help: 'Times the wireguard-go the agent runs exited while the agent ran (it is started again)', registers }),
};
