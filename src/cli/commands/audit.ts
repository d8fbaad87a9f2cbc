// jaco audit: read and follow the audit log (every decision jaco records).
import type { Command } from 'commander';
import { AUDIT_TYPES, isAuditType } from '../../api/reasons/audit.js';
import { keys } from '../../api/keys.js';
import type { AuditEvent } from '../../api/types.js';
import { auditMatches, readAudit, type AuditQuery } from '../../store/audit.js';
import { Informer } from '../../store/informer.js';
import { logger } from '../../observability/log.js';
import { action, CliError, connect, parseOutput } from '../common.js';

function line(ev: AuditEvent, out: string): string {
  if (out === 'json') return JSON.stringify(ev.spec) + '\n';
  const s = ev.spec;
  const fields = Object.entries(s.payload)
    .filter(([k, v]) => !(k === 'deployment' && v === s.deployment)) // already printed once
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `${s.time}  ${s.type.padEnd(18)} ${s.actor.padEnd(10)} ${s.deployment ? `deployment=${s.deployment} ` : ''}${fields}\n`;
}

export function registerAudit(program: Command): void {
  program
    .command('audit')
    .description('Show the audit log (placements, restarts, rollouts, drains, rebalancer moves and skips)')
    .option('-f, --follow', 'keep printing new records as they are written')
    .option('--type <types>', 'only these types, comma-separated (see --help for the list)')
    .option('-d, --deployment <name>', 'only records about this deployment')
    .option('--tail <n>', 'only the newest n existing records', (v) => Number(v))
    .option('-o, --output <format>', 'json (one object per line)')
    .addHelpText('after', `\nTypes:\n${Object.entries(AUDIT_TYPES).map(([t, d]) => `  ${t.padEnd(20)} ${d}`).join('\n')}\n\nExample:\n  jaco audit -f --type rebalance_moved,rebalance_skipped\n`)
    .action(
      action(async (opts: { follow?: boolean; type?: string; deployment?: string; tail?: number; output?: string }, cmd: Command) => {
        const out = parseOutput(opts.output, ['table', 'json']);
        const types = opts.type?.split(',').map((t) => t.trim()).filter(Boolean);
        const unknown = types?.filter((t) => !isAuditType(t)) ?? [];
        if (unknown.length) throw new CliError(`unknown audit type ${unknown.join(', ')}; see jaco audit --help`);
        const q: AuditQuery = { types, deployment: opts.deployment, limit: opts.tail };
        const store = await connect(cmd);
        try {
          const { events } = await readAudit(store, q);
          for (const e of events) process.stdout.write(line(e.value, out));
          if (!opts.follow) return;
          const inf = new Informer<AuditEvent>(store, keys.audits(), { kind: 'AuditEvent', log: logger('audit') });
          const seen = new Set(events.map((e) => e.key));
          await inf.start();
          const printNew = (key: string, ev: AuditEvent) => {
            if (seen.has(key) || !auditMatches(ev, q)) return;
            seen.add(key);
            process.stdout.write(line(ev, out));
          };
          for (const [k, v] of [...inf.items].sort(([a], [b]) => (a < b ? -1 : 1))) printNew(k, v.value);
          inf.on('change', (c) => c.type === 'put' && c.value && printNew(c.key, c.value.value));
          await new Promise<void>((resolve) => {
            process.once('SIGINT', resolve);
            process.once('SIGTERM', resolve);
          });
          await inf.stop();
        } finally {
          store.close();
        }
      }),
    );
}
