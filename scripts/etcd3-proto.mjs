// etcd3 parses its rpc.proto each time a process loads it (protobufjs, through @grpc/proto-loader's
// loadSync): 50-75 ms of every jaco process's start on these machines, for the same file each
// time. The bundle (scripts/build-bundle.mjs) carries the parsed file instead, as protobufjs's
// JSON made here at build time by the same loader from the same file, and etcd3 builds its
// package definition from it with proto-loader's fromJSON (~20 ms). Only the first argument of
// etcd3's call changes; its options stay its own. Checked in src/store/etcd3-proto.test.ts: the
// same package definition either way.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const etcd3Dir = dirname(require.resolve('etcd3/package.json'));
/** The etcd3 file that loads the proto, and the proto itself. */
export const ETCD3_POOL = join(etcd3Dir, 'lib', 'connection-pool.js');
export const ETCD3_PROTO = join(etcd3Dir, 'proto', 'rpc.proto');
/** proto-loader as etcd3 resolves it (etcd3 may carry its own). */
const poolRequire = createRequire(ETCD3_POOL);
export const protoLoader = () => poolRequire('@grpc/proto-loader');

const CALL = /\(0, proto_loader_1\.loadSync\)\(`\$\{__dirname\}\/\.\.\/proto\/rpc\.proto`, \{\s*keepCase: true,/;

/** The parsed rpc.proto as protobufjs's JSON (what fromJSON takes), parsed as etcd3's call parses it. */
export function etcdProtoJson() {
  const { loadProtosWithOptionsSync } = poolRequire('@grpc/proto-loader/build/src/util.js');
  return loadProtosWithOptionsSync(ETCD3_PROTO, { keepCase: true }).toJSON();
}

/** etcd3's connection-pool.js with its loadSync of rpc.proto made a fromJSON of the parsed file. */
export function withParsedProto(source = readFileSync(ETCD3_POOL, 'utf8')) {
  if (!CALL.test(source)) throw new Error(`${ETCD3_POOL} no longer loads rpc.proto as scripts/etcd3-proto.mjs expects (loadSync of ../proto/rpc.proto with keepCase: true): update the script`);
  return source.replace(CALL, (call) => call.replace(/\(0, proto_loader_1\.loadSync\)\(`[^`]*`/, `(0, proto_loader_1.fromJSON)(${JSON.stringify(etcdProtoJson())}`));
}
