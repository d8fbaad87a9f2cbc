import { describe, expect, it } from 'vitest';
import { canonicalFiles, fileTarget, fileTargetProblem, filesUsed, nodeFileName, serviceFiles } from './files.js';
import { deploymentRuleIssues } from './rules.js';
import { API_VERSION, type Deployment, type FileKind, type FileRef, type ServiceSpec } from './types.js';

describe('where a secret or config appears in the container', () => {
  it.each<[FileKind, FileRef, string]>([
    ['secret', { source: 'db_password' }, '/run/secrets/db_password'],
    ['secret', { source: 'shop_db_password_0a1b2c3d4e5f', target: 'db_password' }, '/run/secrets/db_password'],
    ['secret', { source: 's', target: 'certs/tls.key' }, '/run/secrets/certs/tls.key'],
    ['secret', { source: 's', target: '/etc/ssl/private/key.pem' }, '/etc/ssl/private/key.pem'],
    ['secret', { source: 's', target: '/etc//ssl/./key.pem' }, '/etc/ssl/key.pem'],
    ['config', { source: 'app.conf' }, '/app.conf'],
    ['config', { source: 'c', target: 'etc/app.conf' }, '/etc/app.conf'],
    ['config', { source: 'c', target: '/etc/nginx/nginx.conf' }, '/etc/nginx/nginx.conf'],
  ])('%s %j → %s', (kind, ref, target) => expect(fileTarget(kind, ref)).toBe(target));

  it.each<[FileKind, FileRef, string | undefined]>([
    ['secret', { source: 's', target: '../../etc/shadow' }, 'target "../../etc/shadow" may not contain ".."'],
    ['config', { source: 'c', target: '/etc/../x' }, 'target "/etc/../x" may not contain ".."'],
    ['config', { source: 'c', target: '/' }, 'target "/" names a directory, not a file'],
    ['secret', { source: 's', target: '/run/secrets' }, 'target "/run/secrets" names a directory, not a file'],
    ['secret', { source: 's', target: 'ok..name' }, undefined],
  ])('%s %j: %s', (kind, ref, problem) => expect(fileTargetProblem(kind, ref)).toBe(problem));

  it('defaults: owner 0:0, mode 0444; each file its own name on the node, even one source twice', () => {
    const t: ServiceSpec = { image: 'x', secrets: [{ source: 'a' }, { source: 'a', target: '/etc/a', mode: 0o400, uid: 1 }], configs: [{ source: 'c' }] };
    expect(serviceFiles(t).map((f) => [f.kind, f.target, f.uid, f.gid, f.mode.toString(8), nodeFileName(f)])).toEqual([
      ['secret', '/run/secrets/a', 0, 0, '444', 'secret-0'],
      ['secret', '/etc/a', 1, 0, '400', 'secret-1'],
      ['config', '/c', 0, 0, '444', 'config-0'],
    ]);
    expect(filesUsed(t)).toEqual(['secret/a', 'config/c']);
    expect(canonicalFiles({})).toEqual([]);
  });
});

describe('the rules of a service\'s files', () => {
  const dep = (svc: ServiceSpec): Deployment => ({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name: 'shop' }, spec: { services: { db: svc } } });
  const messages = (svc: ServiceSpec) => deploymentRuleIssues(dep(svc)).filter((i) => i.rule === 'file-target').map((i) => i.message);

  it('two files, or a file and a volume, at one path are refused; so is a path outside a file\'s place', () => {
    expect(messages({ image: 'x', secrets: [{ source: 'a', target: '/etc/x' }], configs: [{ source: 'b', target: '/etc/x' }] })).toEqual(['service "db": config b and secret a both appear at /etc/x']);
    expect(messages({ image: 'x', volumes: [{ type: 'volume', source: 'data', target: '/run/secrets/a' }], secrets: [{ source: 'a' }] })).toEqual(['service "db": secret a and volume data both appear at /run/secrets/a']);
    expect(messages({ image: 'x', secrets: [{ source: 'a', target: '../a' }] })).toEqual(['service "db": secret a: target "../a" may not contain ".."']);
    expect(messages({ image: 'x', secrets: [{ source: 'a' }, { source: 'a', target: 'b' }] })).toEqual([]);
  });
});
