// The cluster resolver's closed vocabularies (controllers/node-agent/dns.ts): how a query ended and
// why an upstream failed. The same strings label its metrics and appear in its logs
// (docs/networking.md lists them).

/** How one query ended: a label of jaco_agent_dns_queries_total. */
export const DNS_OUTCOMES = {
  answered: 'a name of the table with addresses of the type asked: answered from the table (authoritative)',
  nodata: 'a name of the table without an address of the type asked: NOERROR with no answer, as a real server does',
  nxdomain: 'a name under a suffix the table is authoritative for (a deployment) that the table lacks: NXDOMAIN at once, so a resolver walking its search list moves on',
  forwarded: "any other name: relayed to an upstream resolver, whose answer went back as it came (whatever its rcode)",
  servfail: 'a name to forward that could not be: no upstream configured, none answered in time, or too many forwards in flight (SERVFAIL)',
  rejected:
    'a well-formed message the server does not serve: not exactly one question (FORMERR, RFC 9619), an opcode other than QUERY (NOTIMP), a class other than IN for a cluster name (REFUSED), an EDNS version above 0 (BADVERS)',
  malformed: 'not a DNS query (undecodable, or a response sent to the server): dropped without an answer',
} as const;
export type DnsOutcome = keyof typeof DNS_OUTCOMES;

/** Why asking one upstream failed (the next one is asked): a label of jaco_agent_dns_upstream_failures_total. */
export const DNS_UPSTREAM_FAILURES = {
  timeout: 'the upstream did not answer within the forward timeout',
  error: 'the socket failed: connection refused, unreachable, reset, closed before a whole answer',
  bad_answer: 'an answer came that could not be decoded or did not match the question',
  declined: 'the upstream answered SERVFAIL, REFUSED or NOTIMP (as glibc does, the next one is asked; the last such answer goes back when none answers better)',
} as const;
export type DnsUpstreamFailure = keyof typeof DNS_UPSTREAM_FAILURES;
