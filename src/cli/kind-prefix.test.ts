// kubectl's TYPE/NAME on jaco's command line: what jaco prints (`deployment/hello configured`) can be typed back.
import { describe, expect, it } from 'vitest';
import { deploymentArg, typeSlashName } from './common.js';

describe('deploymentArg', () => {
  it.each([
    ['hello', 'hello'],
    ['deployment/hello', 'hello'],
    ['deployments/hello', 'hello'],
    ['deploy/hello/web', 'hello/web'],
    ['hello/web', 'hello/web'],
    ['deploy-web-0', 'deploy-web-0'], // a replica id: no slash, no kind
    ['deployment/deployment', 'deployment'],
  ])('%s → %s', (arg, want) => expect(deploymentArg(arg)).toBe(want));
});

describe('typeSlashName', () => {
  it('splits TYPE/NAME at its first slash; a bare type keeps its separate name', () => {
    expect(typeSlashName('deployment/hello', undefined)).toEqual({ type: 'deployment', name: 'hello' });
    expect(typeSlashName('service/hello/web', undefined)).toEqual({ type: 'service', name: 'hello/web' });
    expect(typeSlashName('nodes', undefined)).toEqual({ type: 'nodes', name: undefined });
    expect(typeSlashName('node', 'node-1')).toEqual({ type: 'node', name: 'node-1' });
    expect(typeSlashName('deployment/', undefined)).toEqual({ type: 'deployment', name: undefined });
  });
  it('refuses a name given twice', () => {
    expect(() => typeSlashName('deployment/hello', 'other')).toThrow(/name the object once: deployment\/hello, or deployment other/);
  });
});
