// pino JSON logs. One root logger per process; controllers take a child with their name, and
// replica / deployment ids go in as fields, never into the message text.
import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

let root: Logger | undefined;

export function rootLogger(): Logger {
  root ??= pino({
    level: process.env.JACO_LOG_LEVEL ?? 'info',
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
  return root;
}

/** Replaces the root logger (tests pass a silent or in-memory one). */
export function setRootLogger(l: Logger): void {
  root = l;
}

/** A logger that writes nothing: one-shot readers of the store that report what they find themselves (the CLI). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

export function logger(component: string, fields: Record<string, unknown> = {}): Logger {
  return rootLogger().child({ component, ...fields });
}
