// A logger for tests: silent unless JACO_TEST_LOG=1, so failures print only what asserts say.
import { pino } from 'pino';
import type { Logger } from '../../src/observability/log.js';

export function testLogger(): Logger {
  return pino({ level: process.env.JACO_TEST_LOG ? 'debug' : 'silent' });
}

/** A failure with a cluster's log tails attached, and said again after them: a run's output is often read from its end only. */
export function failureWithLogs(e: unknown, logs: string): Error {
  const said = e instanceof Error ? e.message : String(e);
  return new Error(`${said}\n${logs}\n---- the failure (above the logs too): ${said}`);
}
