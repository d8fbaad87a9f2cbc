// pino JSON logs. One root logger per process; controllers take a child with their name, and
// replica / deployment ids go in as fields, never into the message text.
//
// pino itself is loaded by the first logger that writes: an operator's command that reads and
// exits logs nothing (its readers take silentLogger()), and loading pino was ~50 ms of the CPU of
// every such command (src/cli/commands/index.test.ts keeps it out).
import { createRequire } from 'node:module';
import type { Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

const load = createRequire(import.meta.url);
const pinoModule = () => load('pino') as typeof import('pino');

let root: Logger | undefined;

export function rootLogger(): Logger {
  if (!root) {
    const { pino } = pinoModule();
    root = pino({
      level: process.env.JACO_LOG_LEVEL ?? 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    });
  }
  return root;
}

/** Replaces the root logger (tests pass a silent or in-memory one). */
export function setRootLogger(l: Logger): void {
  root = l;
}

const nothing = () => undefined;
/** What silentLogger returns: every level a no-op, every child itself. */
const SILENT = Object.freeze({
  level: 'silent',
  levelVal: Infinity,
  fatal: nothing,
  error: nothing,
  warn: nothing,
  info: nothing,
  debug: nothing,
  trace: nothing,
  silent: nothing,
  flush: nothing,
  isLevelEnabled: () => false,
  bindings: () => ({}),
  setBindings: nothing,
  child: (): Logger => SILENT_LOGGER,
});
// The object has every member jaco's code calls on a Logger; pino's type has many more (its
// events, custom levels), which nothing here reads.
const SILENT_LOGGER = SILENT as unknown as Logger;

/** A logger that writes nothing: one-shot readers of the store that report what they find themselves (the CLI). */
export function silentLogger(): Logger {
  return SILENT_LOGGER;
}

export function logger(component: string, fields: Record<string, unknown> = {}): Logger {
  return rootLogger().child({ component, ...fields });
}
