import { describe, expect, it } from 'vitest';
import { clientIdentity, refusal } from './identity.js';

describe('who may do what on the agents\' endpoint', () => {
  it.each([
    ['operator:alice', 'logs', undefined],
    ['operator:alice', 'exec', undefined],
    ['viewer:ci', 'logs', undefined],
    ['viewer:ci', 'exec', 'viewer:ci is a viewer: it may read logs, not exec'],
    ['node:node-1', 'logs', 'certificate "node:node-1" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    ['jaco registry', 'exec', 'certificate "jaco registry" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    [undefined, 'logs', 'certificate "" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    ['operator:', 'logs', 'certificate "operator:" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    ['Operator:alice', 'logs', 'certificate "Operator:alice" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
  ] as const)('%s → %s: %s', (cn, action, why) => expect(refusal(cn, action)).toBe(why));

  it('reads the role and the name', () => {
    expect(clientIdentity('viewer:on-call:bob')).toEqual({ role: 'viewer', name: 'on-call:bob' });
    expect(clientIdentity('node:x')).toBeUndefined();
  });
});
