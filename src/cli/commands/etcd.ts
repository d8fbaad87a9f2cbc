// jaco etcd rbac: gives every jaco process its own etcd user with only the keys it needs — one
// per controller, one per node's agent and ingress (src/store/rbac.ts holds the one definition) —
// and writes each new user's credentials to an env file its systemd unit reads (deploy/README.md).
import type { Command } from 'commander';
import { CONTROLLER_NAMES, provisionRbac } from '../../store/rbac.js';
import { action, CliError, withStore } from '../common.js';

interface RbacFlags {
  out: string;
  enableAuth?: boolean;
  clientTlsDir?: string;
}

export function registerEtcd(program: Command): void {
  const etcd = program.command('etcd').description("etcd's own setup for jaco: users and roles (docs/store.md, Security)");
  etcd
    .command('rbac')
    .description('Create or update the etcd roles and users of jaco: one user per controller, and per node an agent and an ingress user with only their own keys')
    .argument('<node...>', 'the nodes whose agent and ingress get a user (run again for a node that joins later)')
    .option('--out <dir>', 'where the env files of users created now go', './jaco-credentials')
    .option('--enable-auth', "also create the root user (its password in root.env) and turn etcd's authentication on")
    .option('--client-tls-dir <dir>', "where each host keeps its etcd client certificate (`jaco cert etcd-client`; e.g. /etc/jaco/etcd-client): every env file also names its ca.pem, cert.pem and cert.key")
    .addHelpText(
      'after',
      `
Connects with the global connection flags (a user allowed to administer etcd: root, once auth is on).
Writes, mode 600, one env file per user created now (JACO_ETCD_USER, JACO_ETCD_PASSWORD, and with
--client-tls-dir JACO_ETCD_CACERT, JACO_ETCD_CERT, JACO_ETCD_KEY):
  controller-NAME.env   jaco controller NAME (${CONTROLLER_NAMES.join(', ')}): writes only what NAME owns
  controller.env        jaco controller all: holds every controller's role
  agent-NODE.env        jaco agent on NODE: its own node's keys; reads its own nodespecs/NODE
  ingress-NODE.env      jaco ingress on NODE: reads what it routes, writes ingresses/NODE
  viewer.env            reads everything, writes nothing (jaco dashboard without --allow-actions)
  root.env              with --enable-auth: etcd's root (the operators, jaco backup)
A user that exists keeps its password and gets no file (delete it with etcdctl to rotate);
every role is set to exactly its definition, so running it again after an upgrade narrows old grants.
Each node (those named and those registered) that has no nodespecs/NODE gets one, once: the spec a
release before nodespecs/ kept in nodes/NODE (which its agent can write), else an empty one; an
existing nodespecs/NODE is never overwritten. Each is audited (node_spec_seeded).
JACO_CONTROLLER_PASSWORD, if set, is the password of a new jaco-controller user.

Examples:
  jaco --endpoints https://10.0.0.11:2379 --cacert ops/ca.pem --cert ops/cert.pem --key ops/cert.key \\
       etcd rbac --out ./jaco-credentials --enable-auth --client-tls-dir /etc/jaco/etcd-client node-1 node-2 node-3
  jaco --user root:PASSWORD etcd rbac --out ./new node-4
`,
    )
    .action(
      action(async (nodes: string[], f: RbacFlags, cmd: Command) => {
        for (const n of nodes) if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(n)) throw new CliError(`node name ${JSON.stringify(n)}: letters, digits, '.', '_' and '-' only`);
        const controllerPassword = process.env.JACO_CONTROLLER_PASSWORD;
        const applied = await withStore(cmd, (store) => provisionRbac(store, nodes, { outDir: f.out, enableAuth: f.enableAuth, clientTlsDir: f.clientTlsDir, passwords: controllerPassword ? { 'jaco-controller': controllerPassword } : {} }));
        for (const a of applied) process.stdout.write(a.password !== undefined ? `user ${a.user} created: ${f.out}/${a.envFile}\n` : `user ${a.user} kept (its password is unchanged; no file)\n`);
        if (f.enableAuth) process.stdout.write('authentication is on\n');
      }),
    );
}
