// Every `jaco` subcommand, in the order `jaco --help` lists them.
import type { Command } from 'commander';
import { registerAgent } from './agent.js';
import { registerApply } from './apply.js';
import { registerAudit } from './audit.js';
import { registerBackup } from './backup.js';
import { registerController } from './controller.js';
import { registerDashboard } from './dashboard.js';
import { registerDrain } from './drain.js';
import { registerExplain } from './explain.js';
import { registerGet } from './get.js';
import { registerHollowNodes } from './hollow-nodes.js';
import { registerIngress } from './ingress.js';
import { registerNode } from './node.js';
import { registerRebalance } from './rebalance.js';
import { registerRegistry } from './registry.js';
import { registerRollout } from './rollout.js';
import { registerScale } from './scale.js';
import { registerSecrets } from './secret.js';
import { registerStatus } from './status.js';
import { registerTop } from './top.js';
import { registerUp } from './up.js';
import { registerVersion } from './version.js';

export function registerCommands(program: Command): void {
  registerApply(program);
  registerRollout(program);
  registerScale(program);
  registerStatus(program);
  registerGet(program);
  registerTop(program);
  registerExplain(program);
  registerSecrets(program);
  registerDrain(registerNode(program));
  registerRebalance(program);
  registerAudit(program);
  registerBackup(program);
  registerRegistry(program);
  registerDashboard(program);
  registerUp(program, () => program.commands.some((c) => c.name() === 'agent'));
  registerController(program);
  registerAgent(program);
  registerHollowNodes(program);
  registerIngress(program);
  registerVersion(program);
}
