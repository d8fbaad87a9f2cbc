import { describe, expect, it } from 'vitest';
import { logger, silentLogger } from './log.js';

describe('loggers', () => {
  it('a silent logger takes every call a reader makes, and its children are silent too', () => {
    const l = silentLogger();
    const child = l.child({ component: 'x' });
    for (const log of [l, child]) {
      expect(() => {
        log.fatal('f');
        log.error({ err: new Error('e') }, 'e');
        log.warn({ key: 'k' }, 'w');
        log.info('i');
        log.debug('d');
        log.trace('t');
      }).not.toThrow();
      expect(log.level).toBe('silent');
      expect(log.isLevelEnabled('error')).toBe(false);
    }
  });

  it("a component's logger is pino's, loaded when first asked for", () => {
    const l = logger('test', { node: 'n1' });
    expect(l.bindings()).toMatchObject({ component: 'test', node: 'n1' });
    expect(typeof l.flush).toBe('function');
  });
});
