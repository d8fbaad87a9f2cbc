// Day-to-day operations through ./bin/jaco against a real etcd: `jaco scale` (a new revision,
// audited like apply, all-or-nothing) and `jaco backup` (a snapshot restored into a fresh etcd
// with `etcdctl snapshot restore` holds every key; a changed file fails --check).
import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { AuditEvent, Deployment } from '../../src/api/types.js';
import { freePort, startEtcdMember, waitForEtcd } from '../../src/supervise/etcd.js';
import { Store } from '../../src/store/store.js';
import type { BackupSidecar } from '../../src/store/backup.js';
import { jaco } from '../support/cli.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const run = promisify(execFile);
const etcd = useTestEtcd();
const tmp = mkdtempSync(join(tmpdir(), 'jaco-ops-'));

const manifest = (name: string, services: Record<string, unknown>) => JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name }, spec: { services } });

describe('jaco scale', () => {
  it('writes a new revision with the counts, audited as an apply; a bad target writes nothing', async () => {
    const prefix = uniquePrefix();
    const cli = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, ...(input ? { input } : {}) });
    expect((await cli(['apply', '-f', '-'], manifest('shop', { web: { image: 'jaco-demo/busybox:1', replicas: 2 }, db: { image: 'jaco-demo/busybox:1' } }))).code).toBe(0);
    const store = etcd.store(prefix);

    let r = await cli(['scale', 'shop/web=5', 'shop/db=0']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('deployment/shop scaled (revision 2: db: replicas <unset> → 0; web: replicas 2 → 5)\n');
    const dep = (await store.get<Deployment>(keys.deployment('shop')))!.value;
    expect(dep.metadata.generation).toBe(2);
    expect([dep.spec.services.web!.replicas, dep.spec.services.db!.replicas]).toEqual([5, 0]);
    const audit = (await store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec);
    expect(audit.at(-1)).toMatchObject({ type: 'deployment_applied', deployment: 'shop', payload: { revision: 2, result: 'configured', cause: 'scale shop/web=5 shop/db=0' } });
    // The revision is rollback's to undo.
    expect((await cli(['rollback', 'shop'])).stdout).toMatch(/rolled back to revision 1/);
    expect((await store.get<Deployment>(keys.deployment('shop')))!.value.spec.services.web!.replicas).toBe(2);

    // One target wrong: nothing at all is written.
    const before = (await store.listRaw('')).revision;
    r = await cli(['scale', 'shop/web=3', 'shop/nope=1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: scale: deployment "shop" has no service "nope"; it has db, web (nothing was written)\n');
    r = await cli(['scale', 'shop/web=x']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/whole number from 0 to 10000/);
    expect((await store.listRaw('')).revision).toBe(before);
    expect((await cli(['scale', 'shop/web=2'])).stdout).toBe('deployment/shop unchanged\n');
  });
});

describe('jaco backup', () => {
  it('snapshots etcd with a sidecar; the snapshot restored into a fresh etcd holds every key; a changed file fails --check', async () => {
    const prefix = uniquePrefix();
    const cli = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, ...(input ? { input } : {}) });
    expect((await cli(['apply', '-f', '-'], manifest('web', { web: { image: 'jaco-demo/busybox:1', replicas: 3 } }))).code).toBe(0);
    const store = etcd.store(prefix);
    const { kvs } = await store.listRaw('');
    const want = new Map(kvs.map((k) => [k.key.toString(), k.value.toString()]));
    expect(want.size).toBeGreaterThan(2);

    const file = join(tmp, 'backup.db');
    let r = await cli(['backup', file]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const side = JSON.parse(readFileSync(`${file}.json`, 'utf8')) as BackupSidecar;
    expect(side).toMatchObject({ format: 'jaco-backup/1', file: 'backup.db', prefix, etcdVersion: expect.stringMatching(/^3\./), jacoVersion: expect.any(String) });
    expect(side.bytes).toBe(readFileSync(file).length);
    expect(r.stdout).toContain(`sha256 ${side.sha256}`);
    // sha256sum agrees with the sidecar.
    expect((await run('sha256sum', [file])).stdout.split(' ')[0]).toBe(side.sha256);
    expect((await cli(['backup', '--check', file])).stdout).toMatch(/: OK \(/);
    // Never over an existing backup.
    r = await cli(['backup', file]);
    expect([r.code, r.stderr]).toEqual([1, `error: ${file} exists; choose another file (a backup never overwrites one)\n`]);

    // The documented restore (docs/operate.md): etcdctl snapshot restore into a new data dir, a
    // new member started on it.
    const dataDir = join(tmp, 'restored');
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const peer = `http://127.0.0.1:${peerPort}`;
    await run('etcdctl', ['snapshot', 'restore', file, '--name', 'r', '--data-dir', dataDir, '--initial-cluster', `r=${peer}`, '--initial-advertise-peer-urls', peer], { env: { ...process.env, ETCDCTL_API: '3' } });
    const member = startEtcdMember({ name: 'r', dataDir, clientPort, peerPort });
    const restored = new Store({ endpoints: member.endpoint, prefix });
    try {
      await waitForEtcd([member.endpoint], 20_000, member.process);
      const got = await restored.listRaw('');
      expect(new Map(got.kvs.map((k) => [k.key.toString(), k.value.toString()]))).toEqual(want);
      // Revisions too: the restored member resumes from the snapshot's revision.
      expect(got.revision).toBeGreaterThanOrEqual(side.revision);
    } finally {
      restored.close();
      await member.stop();
    }

    // One byte more: the check names the size; a flipped byte of the same size: the checksum.
    appendFileSync(file, 'x');
    r = await cli(['backup', '--check', file]);
    expect([r.code, r.stderr]).toEqual([1, `error: ${file}: ${side.bytes + 1} bytes, but its sidecar says ${side.bytes}: truncated or not this backup's file\n`]);
    const bytes = readFileSync(file).subarray(0, side.bytes);
    bytes[100] = bytes[100]! ^ 0xff;
    writeFileSync(file, bytes);
    r = await cli(['backup', '--check', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/SHA-256 [0-9a-f]{64} does not match its sidecar's/);
    rmSync(`${file}.json`);
    expect((await cli(['backup', '--check', file])).stderr).toMatch(/backup\.db\.json: missing/);
    expect(existsSync(dataDir)).toBe(true);
  });
});
