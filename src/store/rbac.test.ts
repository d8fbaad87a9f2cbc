import { describe, expect, it } from 'vitest';
import { CONTROLLERS } from '../../controllers/index.js';
import { agentRole, allControllersRole, allows, clusterRoles, CONTROLLER_NAMES, controllerRole, envFileText, grantsOf, ingressRole, type Access } from './rbac.js';

describe('the etcd roles (src/store/rbac.ts)', () => {
  it('define a role for every controller a process can run, and for nothing else', () => {
    expect(CONTROLLER_NAMES.sort()).toEqual(Object.keys(CONTROLLERS).sort());
  });

  it('name each user after its process, and give `all` every controller role', () => {
    const roles = clusterRoles(['n1']);
    expect(roles.map((r) => r.name)).toEqual([...CONTROLLER_NAMES.map((n) => `jaco-controller-${n}`), 'jaco-controller', 'jaco-viewer', 'jaco-agent-n1', 'jaco-ingress-n1']);
    expect(new Set(roles.map((r) => r.envFile)).size).toBe(roles.length);
    expect(allControllersRole().alsoRoles).toEqual(CONTROLLER_NAMES.map((n) => `jaco-controller-${n}`));
    expect(() => controllerRole('nope')).toThrow(/no controller named "nope"/);
  });

  const grants = (who: string) => (who === 'agent' ? agentRole('n1') : who === 'ingress' ? ingressRole('n1') : who === 'all' ? allControllersRole() : controllerRole(who));
  it.each<[string, string, Access, boolean]>([
    // Each controller writes what it owns and only reads the rest.
    ['scheduler', 'desired/n1/r', 'readwrite', true],
    ['scheduler', 'deployments/d', 'readwrite', false],
    ['scheduler', 'deployments/d', 'read', true],
    ['scheduler', 'leaders/scheduler/x', 'readwrite', true],
    ['scheduler', 'leaders/rollout/x', 'readwrite', false],
    ['rollout', 'rollouts/d/s', 'readwrite', true],
    ['rollout', 'counters/d/s', 'readwrite', false],
    ['clock', 'clock', 'readwrite', true],
    ['clock', 'clockwork', 'readwrite', false],
    ['clock', 'desired/n1/r', 'readwrite', false],
    ['secrets', 'copies/n1/secret/db', 'readwrite', true],
    ['all', 'desired/n1/r', 'readwrite', true],
    ['all', 'clock', 'readwrite', true],
    ['all', 'deployments/d', 'readwrite', false],
    ['all', 'ingresses/n1', 'readwrite', false],
    // An agent: its own node's keys; what operators decide for it, read only.
    ['agent', 'observed/n1/r', 'readwrite', true],
    ['agent', 'observed/n10/r', 'readwrite', false],
    ['agent', 'observed/n2/r', 'read', false],
    ['agent', 'nodes/n1', 'readwrite', true],
    ['agent', 'nodes/n2', 'readwrite', false],
    ['agent', 'nodespecs/n1', 'read', true],
    ['agent', 'nodespecs/n1', 'readwrite', false],
    ['agent', 'nodespecs/n2', 'read', false],
    ['agent', 'desired/n1/r', 'readwrite', false],
    ['agent', 'desired/n1/r', 'read', true],
    ['ingress', 'ingresses/n1', 'readwrite', true],
    ['ingress', 'ingresses/n2', 'readwrite', false],
    ['ingress', 'desired/n1/r', 'read', false],
  ])('%s: %s %s → %s', (who, key, access, allowed) => {
    expect(allows(grantsOf(grants(who)), key, access)).toBe(allowed);
  });

  it.each([
    [undefined, 'JACO_ETCD_USER=jaco-agent-n1\nJACO_ETCD_PASSWORD=pw\n'],
    ['/etc/jaco/etcd-client', 'JACO_ETCD_USER=jaco-agent-n1\nJACO_ETCD_PASSWORD=pw\nJACO_ETCD_CACERT=/etc/jaco/etcd-client/ca.pem\nJACO_ETCD_CERT=/etc/jaco/etcd-client/cert.pem\nJACO_ETCD_KEY=/etc/jaco/etcd-client/cert.key\n'],
  ])('an env file with client TLS directory %s', (dir, text) => expect(envFileText('jaco-agent-n1', 'pw', dir)).toBe(text));
});
