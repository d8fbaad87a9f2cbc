// A logger for tests: silent unless JACO_TEST_LOG=1, so failures print only what asserts say.
import { pino } from 'pino';
import type { Logger } from '../../src/observability/log.js';

export function testLogger(): Logger {
  return pino({ level: process.env.JACO_TEST_LOG ? 'debug' : 'silent' });
}
