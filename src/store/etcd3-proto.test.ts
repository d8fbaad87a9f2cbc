// The bundle's etcd3 builds its gRPC package from rpc.proto parsed at build time
// (scripts/etcd3-proto.mjs): it must be the very definition etcd3's own loadSync makes.
import { describe, expect, it } from 'vitest';
// @ts-expect-error a build script in plain JavaScript, no types
import { ETCD3_PROTO, etcdProtoJson, protoLoader, withParsedProto } from '../../scripts/etcd3-proto.mjs';

// etcd3's options (node_modules/etcd3/lib/connection-pool.js).
const OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

describe('etcd3 proto parsed at build time', () => {
  it('makes the same package definition as parsing rpc.proto at run time', () => {
    const loader = protoLoader();
    const atRunTime = loader.loadSync(ETCD3_PROTO, OPTIONS);
    const atBuildTime = loader.fromJSON(JSON.parse(JSON.stringify(etcdProtoJson())), OPTIONS);
    expect(Object.keys(atBuildTime).sort()).toEqual(Object.keys(atRunTime).sort());
    expect(Object.keys(atRunTime)).toContain('etcdserverpb.KV');
    // Everything but the functions: method paths, streaming, message descriptors, file descriptors.
    expect(JSON.stringify(atBuildTime)).toBe(JSON.stringify(atRunTime));
  });

  it("changes only the first argument of etcd3's call, and refuses a file it does not know", () => {
    const out: string = withParsedProto();
    expect(out).toContain('(0, proto_loader_1.fromJSON)({"nested":');
    expect(out).not.toContain('loadSync');
    expect(out).toMatch(/\}, \{\s*keepCase: true,\s*longs: String,/);
    expect(() => withParsedProto('const x = 1;')).toThrow(/no longer loads rpc\.proto/);
  });
});
