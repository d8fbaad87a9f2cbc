// jaco cert ca|node|operator: the cluster CA and the certificates of the agents' logs and exec
// endpoint (src/pki/identity.ts): a node's server certificate, an operator's or viewer's client
// certificate. `jaco up` makes them all for a local cluster; on real hosts an operator holding the
// CA directory runs these (docs/operate.md).
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { ensureClusterCa, PkiError, type ClusterCa } from '../../pki/ca.js';
import { clientCommonName, issueClientTls, issueEtcdClientTls, issueEtcdMemberTls, issueNodeTls, nodeCommonName, TLS_FILES } from '../../pki/identity.js';
import { action, CliError } from '../common.js';

/** Where the CLI looks for its client certificate when neither --tls-dir nor JACO_TLS_DIR names one. */
export function defaultClientTlsDir(cwd = process.cwd()): string {
  const local = join(cwd, '.jaco', 'pki', 'operator');
  return existsSync(local) ? local : join(homedir(), '.jaco', 'tls');
}

const DEFAULT_CA_DIR = '.jaco/pki';

/** The CA of a directory, which must exist (a typo must not make a second CA that nothing trusts). */
function existingCa(dir: string): ClusterCa {
  if (!existsSync(join(dir, 'ca.pem'))) throw new CliError(`--ca-dir: ${dir} holds no CA (ca.pem, ca.key); make one with \`jaco cert ca --ca-dir ${dir}\``);
  return ensureClusterCa(dir);
}

function days(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 3650) throw new CliError(`--days: "${v}" is not a whole number of days from 1 to 3650`);
  return n;
}

/** --ip: one address or several, comma-separated, each an IP address. */
function addresses(v: string): string[] {
  const ips = v.split(',').map((s) => s.trim()).filter(Boolean);
  for (const ip of ips) if (!isIP(ip)) throw new CliError(`--ip: "${ip}" is not an IP address`);
  if (!ips.length) throw new CliError('--ip: name at least one address');
  return ips;
}

const pki = <A extends unknown[]>(fn: (...a: A) => Promise<void>) =>
  action(async (...a: A) => {
    try {
      await fn(...a);
    } catch (e) {
      if (e instanceof PkiError || (e as Error).name === 'OpensslNotInstalledError') throw new CliError((e as Error).message);
      throw e;
    }
  });

export function registerCert(program: Command): void {
  const cert = program
    .command('cert')
    .description("The cluster CA and the certificates it issues: the agents' logs and exec endpoint, etcd's members and clients (mutual TLS; docs/operate.md)")
    .addHelpText(
      'after',
      `
Examples:
  jaco cert ca --ca-dir /etc/jaco/pki
  jaco cert node node-1 --ip 10.0.0.11 --ca-dir /etc/jaco/pki --out /var/lib/jaco/agent/node-1/tls
  jaco cert operator alice --ca-dir /etc/jaco/pki                # into ~/.jaco/tls
  jaco cert operator ci --viewer --days 30 --ca-dir /etc/jaco/pki --out ./ci-tls
  jaco cert etcd etcd-a --ip 10.0.0.11,127.0.0.1 --ca-dir /etc/jaco/pki --out ./etcd-a/etcd-tls
  jaco cert etcd-client node-1 --ca-dir /etc/jaco/pki --out ./node-1/etcd-client

Each certificate goes with the CA's certificate into one directory (${TLS_FILES.ca}, ${TLS_FILES.cert},
${TLS_FILES.key} mode 600): an agent serves logs and exec with its node's (--api-tls-dir, default
<state-dir>/tls), \`jaco logs\` and \`jaco exec\` present an operator's (--tls-dir, JACO_TLS_DIR,
else .jaco/pki/operator under the current directory, else ~/.jaco/tls). The CA's key stays in
--ca-dir: keep that directory on the operators' machine, never on the nodes. etcd's members serve
clients and peers with theirs (deploy/etcd/member.env.example names the files), and every jaco
process presents its host's etcd client certificate (JACO_ETCD_CACERT, JACO_ETCD_CERT,
JACO_ETCD_KEY, which \`jaco etcd rbac --client-tls-dir\` writes into each user's env file).
`,
    );
  cert
    .command('ca')
    .description('Make the cluster CA in --ca-dir (once: an existing CA is kept, so what it issued stays valid)')
    .option('--ca-dir <dir>', 'the CA directory', DEFAULT_CA_DIR)
    .action(
      pki(async (f: { caDir: string }) => {
        const dir = resolve(f.caDir);
        const had = existsSync(join(dir, 'ca.pem'));
        const ca = ensureClusterCa(dir);
        process.stdout.write(`${had ? 'kept the CA' : 'made a CA'} in ${dir} (certificate ${ca.certFile}; its key ${ca.keyFile} never goes to a node)\n`);
      }),
    );
  cert
    .command('node')
    .description("Issue a node's server certificate for its agent's logs and exec endpoint")
    .argument('<node>', 'the node name (its certificate is node:<node>; the CLI checks it)')
    .requiredOption('--ip <addresses>', 'the address(es) the endpoint answers at, comma-separated (the agent --address)')
    .option('--ca-dir <dir>', 'the CA directory', DEFAULT_CA_DIR)
    .option('--out <dir>', 'where the files go (default /var/lib/jaco/agent/<node>/tls, the agent\'s default --api-tls-dir)')
    .option('--days <n>', 'validity in days (default 365)')
    .action(
      pki(async (node: string, f: { ip: string; caDir: string; out?: string; days?: string }) => {
        const ips = addresses(f.ip);
        const out = resolve(f.out ?? join('/var/lib/jaco/agent', node, 'tls'));
        issueNodeTls(existingCa(resolve(f.caDir)), node, ips, out, days(f.days));
        process.stdout.write(`issued ${nodeCommonName(node)} for ${ips.join(', ')} into ${out}\n`);
      }),
    );
  cert
    .command('operator')
    .description('Issue a client certificate for `jaco logs` and `jaco exec` (--viewer: logs only)')
    .argument('<name>', 'who holds it (agents log it with every request)')
    .option('--viewer', 'may read logs, may not exec')
    .option('--ca-dir <dir>', 'the CA directory', DEFAULT_CA_DIR)
    .option('--out <dir>', 'where the files go', join(homedir(), '.jaco', 'tls'))
    .option('--days <n>', 'validity in days (default 365)')
    .action(
      pki(async (name: string, f: { viewer?: boolean; caDir: string; out: string; days?: string }) => {
        const role = f.viewer ? 'viewer' : 'operator';
        const out = resolve(f.out);
        issueClientTls(existingCa(resolve(f.caDir)), role, name, out, days(f.days));
        process.stdout.write(`issued ${clientCommonName(role, name)} into ${out}\n`);
      }),
    );
  cert
    .command('etcd')
    .description("Issue an etcd member's certificate: it serves clients and its peers over TLS, and dials its peers with it")
    .argument('<member>', 'the member name (ETCD_NAME)')
    .requiredOption('--ip <addresses>', 'every address its clients and peers dial, comma-separated (its host address, and 127.0.0.1 if it listens there)')
    .option('--ca-dir <dir>', 'the CA directory', DEFAULT_CA_DIR)
    .option('--out <dir>', 'where the files go (copy them to the member as /etc/jaco/etcd-tls)', '/etc/jaco/etcd-tls')
    .option('--days <n>', 'validity in days (default 365)')
    .action(
      pki(async (member: string, f: { ip: string; caDir: string; out: string; days?: string }) => {
        const ips = addresses(f.ip);
        const out = resolve(f.out);
        issueEtcdMemberTls(existingCa(resolve(f.caDir)), member, ips, out, days(f.days));
        process.stdout.write(`issued etcd:${member} for ${ips.join(', ')} into ${out}\n`);
      }),
    );
  cert
    .command('etcd-client')
    .description("Issue a host's etcd client certificate, which its jaco processes present to etcd (each still logs in as its own user)")
    .argument('<host>', 'the host it is for (its name goes in the certificate)')
    .option('--ca-dir <dir>', 'the CA directory', DEFAULT_CA_DIR)
    .option('--out <dir>', 'where the files go (copy them to the host as /etc/jaco/etcd-client)', '/etc/jaco/etcd-client')
    .option('--days <n>', 'validity in days (default 365)')
    .action(
      pki(async (host: string, f: { caDir: string; out: string; days?: string }) => {
        const out = resolve(f.out);
        issueEtcdClientTls(existingCa(resolve(f.caDir)), host, out, days(f.days));
        process.stdout.write(`issued etcd-client:${host} into ${out}\n`);
      }),
    );
}
