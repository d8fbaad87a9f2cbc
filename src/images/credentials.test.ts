// The operator's Docker credentials from temporary config dirs, and the credential-helper protocol
// through a fake docker-credential-* script on PATH.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CredentialHelperError, DOCKER_HUB_AUTH_KEY, DockerConfigError, dockerConfigDir, operatorCredentials } from './credentials.js';
import type { RegistryCredentials } from './registry.js';

const root = mkdtempSync(join(tmpdir(), 'jaco-docker-config-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
function configDir(config: unknown): string {
  const dir = join(root, `c${n++}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'config.json'), typeof config === 'string' ? config : JSON.stringify(config));
  return dir;
}
const b64 = (s: string) => Buffer.from(s).toString('base64');

// A helper as docker-credential-helpers behave: JSON for what it holds, "credentials not found" (exit 1) otherwise.
const bin = join(root, 'bin');
mkdirSync(bin);
writeFileSync(
  join(bin, 'docker-credential-fake'),
  `#!/bin/sh
[ "$1" = get ] || exit 2
read -r server
case "$server" in
  reg.example:5000) echo '{"ServerURL":"reg.example:5000","Username":"helper-user","Secret":"helper-pw"}' ;;
  tok.example) echo '{"ServerURL":"tok.example","Username":"<token>","Secret":"refresh-me"}' ;;
  ${DOCKER_HUB_AUTH_KEY}) echo '{"ServerURL":"${DOCKER_HUB_AUTH_KEY}","Username":"hubber","Secret":"hub-pw"}' ;;
  broken.example) echo 'keychain locked' >&2; exit 3 ;;
  *) echo 'credentials not found in native keychain'; exit 1 ;;
esac
`,
);
chmodSync(join(bin, 'docker-credential-fake'), 0o755);
const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };

describe('operatorCredentials: auths in config.json', () => {
  const dir = configDir({
    auths: {
      '127.0.0.1:5000': { auth: b64('alice:pa:ss') },
      'plain.example': { username: 'bob', password: 'pw' },
      'oauth.example': { auth: '', identitytoken: 'idtok' },
      [DOCKER_HUB_AUTH_KEY]: { auth: b64('hubuser:hubpw') },
      'https://legacy.example/v2/': { auth: b64('old:timer') },
      'empty.example': {},
    },
  });
  const cases: [string, RegistryCredentials | undefined][] = [
    // The password keeps every ":" after the first.
    ['127.0.0.1:5000', { username: 'alice', password: 'pa:ss' }],
    ['plain.example', { username: 'bob', password: 'pw' }],
    ['oauth.example', { identityToken: 'idtok' }],
    // Docker Hub is docker.io in references and its v1 index URL in config.json.
    ['docker.io', { username: 'hubuser', password: 'hubpw' }],
    ['legacy.example', { username: 'old', password: 'timer' }],
    ['empty.example', undefined],
    ['127.0.0.1:5001', undefined],
  ];
  it.each(cases)('%s → %j', async (registry, want) => expect(await operatorCredentials(registry, { configDir: dir, env })).toEqual(want));

  it('has none when there is no config.json, and names the file it cannot read', async () => {
    const empty = join(root, 'none');
    mkdirSync(empty);
    expect(await operatorCredentials('127.0.0.1:5000', { configDir: empty })).toBeUndefined();
    const bad = configDir('{"auths": ');
    await expect(operatorCredentials('x.example', { configDir: bad })).rejects.toThrow(DockerConfigError);
    await expect(operatorCredentials('x.example', { configDir: bad })).rejects.toThrow(`${join(bad, 'config.json')} is not Docker's config file`);
    const noColon = configDir({ auths: { 'x.example': { auth: b64('nocolon') } } });
    await expect(operatorCredentials('x.example', { configDir: noColon })).rejects.toThrow('does not decode to user:password');
  });

  it('finds the config under $DOCKER_CONFIG, else ~/.docker', () => {
    expect(dockerConfigDir({ DOCKER_CONFIG: '/etc/dc', HOME: '/home/o' })).toBe('/etc/dc');
    expect(dockerConfigDir({ HOME: '/home/o' })).toBe('/home/o/.docker');
  });
});

describe('operatorCredentials: credential helpers', () => {
  it('asks the helper named for the registry (credHelpers), and only it', async () => {
    const dir = configDir({ credHelpers: { 'reg.example:5000': 'fake', 'tok.example': 'fake' }, auths: { 'reg.example:5000': { auth: b64('file:ignored') }, 'other.example': { auth: b64('file:used') } } });
    expect(await operatorCredentials('reg.example:5000', { configDir: dir, env })).toEqual({ username: 'helper-user', password: 'helper-pw' });
    // "<token>" as the user: the secret is an identity token.
    expect(await operatorCredentials('tok.example', { configDir: dir, env })).toEqual({ identityToken: 'refresh-me' });
    // No helper for this one and no credsStore: the file's entry.
    expect(await operatorCredentials('other.example', { configDir: dir, env })).toEqual({ username: 'file', password: 'used' });
  });

  it('asks credsStore for every registry, with Hub under its index URL; "not found" is none', async () => {
    const dir = configDir({ credsStore: 'fake', auths: { 'nowhere.example': {} } });
    expect(await operatorCredentials('docker.io', { configDir: dir, env })).toEqual({ username: 'hubber', password: 'hub-pw' });
    expect(await operatorCredentials('nowhere.example', { configDir: dir, env })).toBeUndefined();
  });

  it('reports a helper that is missing or fails', async () => {
    const missing = configDir({ credsStore: 'nonexistent-helper' });
    await expect(operatorCredentials('reg.example:5000', { configDir: missing, env })).rejects.toThrow(new CredentialHelperError('the credential helper docker-credential-nonexistent-helper (named in Docker\'s config) is not on PATH'));
    const failing = configDir({ credsStore: 'fake' });
    await expect(operatorCredentials('broken.example', { configDir: failing, env })).rejects.toThrow('docker-credential-fake get failed (exit 3): keychain locked');
  });
});
