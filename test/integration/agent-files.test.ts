// The node-agent's delivery of secrets and configs on this host, for real: a tmpfs mounted per
// container under the state directory (the test runs as root, as an agent does), each file with
// its owner and mode, unmounted and removed with the container; the plaintext on no disk.
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statfsSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, type NodeCopy } from '../../src/api/types.js';
import { copyAad, generateKeyPair, seal } from '../../src/secrets/seal.js';
import { FileDeliveryError, ReplicaFiles, TmpfsDelivery, releaseAllFiles } from '../../controllers/node-agent/files.js';
import { testLogger } from '../support/log.js';

const TMPFS = 0x01021994;
const PLAIN = 'rotate-me-8c1f0e';
const log = testLogger();

describe('secrets and configs on a tmpfs of their own (TmpfsDelivery, ReplicaFiles)', () => {
  let state: string;
  const key = generateKeyPair('nk');
  const copyOf = (kind: 'secret' | 'config', name: string, value: string, sealTo = key): NodeCopy => ({
    apiVersion: API_VERSION,
    kind: 'NodeCopy',
    metadata: { name },
    spec: { node: 'n1', kind, name, uid: `u-${name}`, nodeKey: sealTo.id, size: value.length, sealed: seal(Buffer.from(value), sealTo, copyAad('n1', kind, name, `u-${name}`)) },
  });

  beforeAll(() => {
    if (process.getuid?.() !== 0) throw new Error('this test mounts tmpfs as an agent does: run it as root');
    state = mkdtempSync(join(tmpdir(), 'jaco-agent-state-'));
  });
  afterAll(async () => {
    await releaseAllFiles(state, log);
    rmSync(state, { recursive: true, force: true });
  });

  it('writes each file on a tmpfs mounted for the container, with its owner and mode; removes it all on release', async () => {
    const delivery = new TmpfsDelivery(join(state, 'files'), log);
    const files = new ReplicaFiles('n1', key, delivery, log);
    const copies = new Map([['secret/db_password', copyOf('secret', 'db_password', PLAIN)], ['config/app.conf', copyOf('config', 'app.conf', 'listen 80;\n')]]);
    const dir = await files.prepare('jaco-abc-n1-r1', { image: 'x', secrets: [{ source: 'db_password', uid: 999, gid: 998, mode: 0o400 }], configs: [{ source: 'app.conf' }] }, (kind, name) => copies.get(`${kind}/${name}`));
    expect(dir).toBe(join(state, 'files', 'jaco-abc-n1-r1'));
    // A mount of its own, of type tmpfs, private to root.
    expect(statfsSync(dir!).type).toBe(TMPFS);
    expect(statSync(dir!).dev).not.toBe(statSync(join(state, 'files')).dev);
    expect(statSync(dir!).mode & 0o777).toBe(0o700);
    expect(statSync(join(state, 'files')).mode & 0o777).toBe(0o700);
    const s = statSync(join(dir!, 'secret-0'));
    expect([s.uid, s.gid, s.mode & 0o777]).toEqual([999, 998, 0o400]);
    expect(readFileSync(join(dir!, 'secret-0'), 'utf8')).toBe(PLAIN);
    expect(statSync(join(dir!, 'config-0')).mode & 0o777).toBe(0o444);
    expect(readFileSync(join(dir!, 'config-0'), 'utf8')).toBe('listen 80;\n');
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).toContain(` ${dir} `);
    // Written again (a resume): same files, same mount.
    await files.prepare('jaco-abc-n1-r1', { image: 'x', secrets: [{ source: 'db_password', uid: 999, gid: 998, mode: 0o400 }] }, (kind, name) => copies.get(`${kind}/${name}`));
    expect(readFileSync('/proc/self/mountinfo', 'utf8').split(` ${dir} `).length - 1).toBe(1);
    await files.release('jaco-abc-n1-r1');
    expect(existsSync(dir!)).toBe(false);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${dir} `);
  });

  it('refuses to start without a copy, or with one sealed to another key, naming the file and never its value', async () => {
    const files = new ReplicaFiles('n1', key, new TmpfsDelivery(join(state, 'files'), log), log);
    const t = { image: 'x', secrets: [{ source: 'db_password' }] };
    const codeOf = async (copy: NodeCopy | undefined) => {
      try {
        await files.prepare('jaco-abc-n1-r2', t, () => copy);
      } catch (e) {
        expect(e).toBeInstanceOf(FileDeliveryError);
        expect((e as Error).message).not.toContain(PLAIN);
        return [(e as FileDeliveryError).code, (e as Error).message];
      }
      return ['prepared'];
    };
    expect(await codeOf(undefined)).toEqual(['secret_missing', 'no copy of secret db_password on this node yet']);
    const [code, msg] = await codeOf(copyOf('secret', 'db_password', PLAIN, generateKeyPair('nk')));
    expect(code).toBe('secret_unreadable');
    expect(msg).toMatch(/cannot be opened: sealed to key nk-/);
    // What decide sees: ready, or unreadable with why.
    const states = files.states([
      { key: 'copies/n1/secret/a', modRevision: 1, createRevision: 1, version: 1, value: copyOf('secret', 'a', PLAIN) },
      { key: 'copies/n1/secret/b', modRevision: 1, createRevision: 1, version: 1, value: copyOf('secret', 'b', PLAIN, generateKeyPair('nk')) },
    ]);
    expect(states.get('secret/a')).toEqual({ state: 'ready', uid: 'u-a' });
    expect(states.get('secret/b')).toMatchObject({ state: 'unreadable', detail: expect.stringMatching(/^sealed to node key nk-/) });
  });

  it('sweeps the files of this agent\'s containers that are gone — and only its own', async () => {
    const delivery = new TmpfsDelivery(join(state, 'files'), log);
    const files = new ReplicaFiles('n1', key, delivery, log);
    const copies = new Map([['secret/s', copyOf('secret', 's', PLAIN)]]);
    const t = { image: 'x', secrets: [{ source: 's' }] };
    for (const c of ['jaco-abc-n1-keep', 'jaco-abc-n1-gone', 'jaco-abc-n10-other', 'jaco-zzz-n1-other-cluster']) await files.prepare(c, t, (k, n) => copies.get(`${k}/${n}`));
    expect(await files.sweep('jaco-abc-n1-', (c) => c === 'jaco-abc-n1-keep')).toEqual(['jaco-abc-n1-gone']);
    expect(delivery.list().sort()).toEqual(['jaco-abc-n1-keep', 'jaco-abc-n10-other', 'jaco-zzz-n1-other-cluster']);
  });

  it('never writes through a link planted in a container\'s directory', async () => {
    const delivery = new TmpfsDelivery(join(state, 'files'), log);
    const dir = await delivery.write('jaco-abc-n1-link', [{ name: 'secret-0', content: Buffer.from('a'), uid: 0, gid: 0, mode: 0o444 }]);
    const outside = join(state, 'outside');
    rmSync(join(dir, 'secret-0'));
    symlinkSync(outside, join(dir, 'secret-0'));
    await expect(delivery.write('jaco-abc-n1-link', [{ name: 'secret-0', content: Buffer.from(PLAIN), uid: 0, gid: 0, mode: 0o444 }])).rejects.toMatchObject({ code: 'secret_delivery_failed' });
    expect(existsSync(outside)).toBe(false);
    expect(lstatSync(join(dir, 'secret-0')).isSymbolicLink()).toBe(true);
    await delivery.release('jaco-abc-n1-link');
  });
});
