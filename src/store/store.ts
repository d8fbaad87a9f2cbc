// The etcd layer: connection, typed reads, and compare-and-swap writes under the key prefix.
// Nothing outside src/store/ imports etcd3. Every write is a transaction of Ops (writer.ts);
// metadata.resourceVersion of what we return is the key's mod_revision.
import { circuitBreaker, ConsecutiveBreaker, ExponentialBackoff, handleWhen, retry, wrap } from 'cockatiel';
import { readFileSync } from 'node:fs';
import { Etcd3, isRecoverableError, type IKeyValue, type IRangeResponse, type IResponseHeader, type Namespace } from 'etcd3';
import { EtcdUnreachableError, isUnavailable, NotFoundError, oldAuthRevision, UnreadableValueError } from './errors.js';

import { DEFAULT_ENDPOINTS, DEFAULT_PREFIX } from './defaults.js';
import { guardWatches } from './watch-guard.js';

export { DEFAULT_ENDPOINTS, DEFAULT_PREFIX };
/** etcd's default --max-request-bytes. */
export const MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;
/** etcd's default --max-txn-ops. */
export const MAX_TXN_OPS = 128;
/** Page size of paginated lists (keeps each response far below gRPC's message limit). */
export const LIST_PAGE = 500;
/**
 * Deadline of a unary call. Above etcd's own server-side timeouts (a write answers "request timed
 * out" after 5 s + 2 election timeouts), so a call etcd would answer gets its answer; it only ends
 * calls that would otherwise wait for ever.
 */
export const CALL_TIMEOUT_MS = 15_000;
/** Tries of a call whose token etcd refuses as old, each after a login again (Store.relogin). */
const RELOGIN_ATTEMPTS = 8;

export interface StoreOptions {
  endpoints?: string[] | string;
  prefix?: string;
  dialTimeoutMs?: number;
  /** Deadline of each unary call (default CALL_TIMEOUT_MS); watch and keepalive streams have none. */
  callTimeoutMs?: number;
  /** etcd authentication (etcd RBAC: src/store/rbac.ts gives each process only its own keys). */
  user?: string;
  password?: string;
  /** TLS: CA bundle that signed the etcd servers (https:// endpoints), client certificate and key. */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /**
   * The HTTP/2 flow-control window this client gives etcd (default gRPC's 64 KiB). Every watch of
   * a client shares one stream: a client carrying many (the thousand agents of a hollow-nodes
   * process) needs a larger one, or a burst of writes fills etcd's send buffer for the stream and
   * every watcher on it turns "slow" — caught up later from etcd's backend, its most expensive read.
   */
  flowControlWindowBytes?: number;
}

/** The connection flags every jaco command shares, before the environment and defaults apply. */
export interface ConnectionFlags {
  endpoints?: string;
  prefix?: string;
  /** NAME or NAME:PASSWORD, as etcdctl's --user. */
  user?: string;
  cacert?: string;
  cert?: string;
  key?: string;
}


export class StoreConfigError extends Error {
  override name = 'StoreConfigError';
}

export interface Versioned<T> {
  /** Key relative to the prefix. */
  key: string;
  value: T;
  modRevision: number;
  createRevision: number;
  version: number;
  lease?: string;
}

/** What Store.rangeFacts finds under a prefix at a revision. */
export interface RangeFacts {
  count: number;
  newest: number;
  /** Keys (relative to the store prefix) changed after the revision asked for, with their mod revisions. */
  changed?: { key: string; modRevision: number }[];
}

export interface ListResult<T> {
  items: Versioned<T>[];
  /** The store revision the list was read at. */
  revision: number;
}

/**
 * Resolves connection options from flags, then the environment (JACO_ENDPOINTS, JACO_PREFIX,
 * JACO_ETCD_USER, JACO_ETCD_PASSWORD, JACO_ETCD_CACERT, JACO_ETCD_CERT, JACO_ETCD_KEY), then defaults.
 */
export function storeOptionsFrom(flags: ConnectionFlags): StoreOptions & { endpoints: string[]; prefix: string } {
  const env = process.env;
  const endpoints = (flags.endpoints ?? env.JACO_ENDPOINTS ?? DEFAULT_ENDPOINTS)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  let prefix = flags.prefix ?? env.JACO_PREFIX ?? DEFAULT_PREFIX;
  if (!prefix.endsWith('/')) prefix += '/';
  const userFlag = flags.user ?? env.JACO_ETCD_USER;
  const [user, inlinePassword] = userFlag ? [userFlag.split(':')[0], userFlag.includes(':') ? userFlag.slice(userFlag.indexOf(':') + 1) : undefined] : [];
  const password = inlinePassword ?? env.JACO_ETCD_PASSWORD;
  if (user && password === undefined) throw new StoreConfigError(`etcd user ${user} needs a password: --user ${user}:PASSWORD or JACO_ETCD_PASSWORD`);
  return {
    endpoints,
    prefix,
    ...(user ? { user, password } : {}),
    caFile: flags.cacert ?? env.JACO_ETCD_CACERT,
    certFile: flags.cert ?? env.JACO_ETCD_CERT,
    keyFile: flags.key ?? env.JACO_ETCD_KEY,
  };
}

/**
 * etcd is dialled at IP addresses (https://127.0.0.1:2379) whose certificates name those IPs; grpc
 * passes the host as the TLS server name, and Node warns (DEP0123) on every such process's stderr —
 * an operator's `jaco get nodes` included. The warning is about SNI only (the IP is still verified
 * against the certificate), so that one is dropped; every other warning passes.
 */
function quietIpServerName(): void {
  if (quietIpServerName.done) return;
  quietIpServerName.done = true;
  const emit = process.emitWarning.bind(process) as (...a: unknown[]) => void;
  process.emitWarning = ((warning: unknown, ...rest: unknown[]) => {
    const code = typeof rest[0] === 'object' && rest[0] ? (rest[0] as { code?: string }).code : rest[1];
    if (code === 'DEP0123') return;
    emit(warning, ...rest);
  }) as typeof process.emitWarning;
}
quietIpServerName.done = false;

function readPem(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new StoreConfigError(`cannot read the ${what} ${file}: ${(e as Error).message}`);
  }
}

export function decodeJson<T>(kv: IKeyValue, prefixLength: number): Versioned<T> {
  let value: T;
  try {
    value = JSON.parse(kv.value.toString('utf8')) as T;
  } catch (e) {
    throw new UnreadableValueError(kv.key.toString('utf8').slice(prefixLength), `not JSON: ${(e as Error).message}`);
  }
  stampVersion(value, kv.mod_revision);
  return {
    key: kv.key.toString('utf8').slice(prefixLength),
    value,
    modRevision: Number(kv.mod_revision),
    createRevision: Number(kv.create_revision),
    version: Number(kv.version),
    lease: kv.lease === '0' ? undefined : kv.lease,
  };
}

/** Sets metadata.resourceVersion on an object read from the store. */
export function stampVersion(value: unknown, modRevision: string | number): void {
  const meta = (value as { metadata?: { resourceVersion?: string } } | null)?.metadata;
  if (meta && typeof meta === 'object') meta.resourceVersion = String(modRevision);
}

/** The JSON stored for an object: resourceVersion is the key's mod_revision, never stored. */
export function encodeJson(value: unknown): string {
  const meta = (value as { metadata?: Record<string, unknown> } | null)?.metadata;
  if (meta && typeof meta === 'object' && 'resourceVersion' in meta) {
    const { resourceVersion: _rv, ...rest } = meta;
    return JSON.stringify({ ...(value as object), metadata: rest });
  }
  return JSON.stringify(value);
}

export class Store {
  readonly client: Etcd3;
  readonly ns: Namespace;
  readonly prefix: string;
  readonly endpoints: string[];
  /** Who reads through this client: its etcd user, or its client certificate's file ('' for neither). */
  readonly reader: string;

  constructor(opts: StoreOptions = {}) {
    this.endpoints = typeof opts.endpoints === 'string' ? opts.endpoints.split(',') : (opts.endpoints ?? [process.env.JACO_ENDPOINTS ?? DEFAULT_ENDPOINTS]);
    this.reader = opts.user ?? opts.certFile ?? '';
    this.prefix = (opts.prefix ?? process.env.JACO_PREFIX ?? DEFAULT_PREFIX).replace(/\/?$/, '/');
    if ((opts.certFile || opts.keyFile) && !(opts.certFile && opts.keyFile)) throw new StoreConfigError('a client certificate needs both --cert and --key');
    if (opts.caFile) quietIpServerName();
    this.client = new Etcd3({
      hosts: this.endpoints,
      ...(opts.user ? { auth: { username: opts.user, password: opts.password ?? '' } } : {}),
      ...(opts.caFile
        ? {
            credentials: {
              rootCertificate: readPem(opts.caFile, 'CA certificate'),
              ...(opts.certFile ? { certChain: readPem(opts.certFile, 'client certificate'), privateKey: readPem(opts.keyFile!, 'client key') } : {}),
            },
          }
        : {}),
      dialTimeout: opts.dialTimeoutMs ?? 3000,
      grpcOptions: {
        'grpc.max_receive_message_length': 64 * 1024 * 1024,
        ...(opts.flowControlWindowBytes ? { 'grpc-node.flow_control_window': opts.flowControlWindowBytes } : {}),
      },
      // etcd3's default breaker holds a host off for 5 s after 3 failures; after an etcd restart
      // or a network blip jaco wants to be back within a second.
      faultHandling: {
        host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(3) }),
        // etcd3's own (retry a recoverable error up to 3 times), and a login again when etcd
        // refuses the token as older than its auth store (see oldAuthRevision).
        global: wrap(retry(handleWhen(isRecoverableError), { maxAttempts: 3 }), this.relogin()),
      },
      // Without a deadline a call on a connection that went silent (no reply, no reset: a
      // partition, a stalled member) waits for ever — and when it is the breaker's half-open trial,
      // every later call to that host waits behind it (test/integration/store-hung-call.test.ts;
      // the likely cause of a chaos run's 60 s without a sample, issue 11). With a deadline the
      // call fails as DEADLINE_EXCEEDED, a recoverable error: the host is reset, the call retried.
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + (opts.callTimeoutMs ?? CALL_TIMEOUT_MS) }),
    });
    this.ns = this.client.namespace(this.prefix);
    // The etcd3 client's watch manager, one per namespace, guarded against its faults (watch-guard.ts).
    for (const n of [this.client, this.ns]) guardWatches(n, opts.user ? () => this.dropToken() : undefined);
  }

  /**
   * After any change of users or roles (`jaco etcd rbac` adding a node's users) etcd refuses every
   * token issued before it: "revision of auth store is old". etcd's own client logs in again on
   * it; etcd3 only on "invalid auth token", so without this every process of the cluster failed
   * each call from then on (found when the e2e fixture added a node's users under running
   * processes). Dropping the cached token makes the retried call log in first.
   *
   * One login again is not enough: a node joining writes several users, roles and grants, each a
   * new auth revision, and a call between two of them is refused again with its fresh token (a
   * controller's pass failed so in a clean run, and a test's call failed its file). So the login
   * again is retried, with back-off, for as long as such a burst lasts (~3 s), as etcd's own
   * client does (it retries a unary call up to its retry limit, logging in again each time).
   */
  private relogin() {
    const policy = retry(handleWhen(oldAuthRevision), { maxAttempts: RELOGIN_ATTEMPTS, backoff: new ExponentialBackoff({ initialDelay: 20, maxDelay: 800 }) });
    policy.onRetry(() => this.dropToken());
    return policy;
  }

  private dropToken(): void {
    (this.client as unknown as { pool: { authenticator: { invalidateMetadata(): void } } }).pool.authenticator.invalidateMetadata();
  }

  /** Fails fast with EtcdUnreachableError when no endpoint answers within timeoutMs. */
  async ping(timeoutMs = 3000): Promise<number> {
    try {
      const res = await withTimeout(this.client.maintenance.status(), timeoutMs, 'no answer');
      return Number(res.header.revision);
    } catch (e) {
      throw this.unreachable(e);
    }
  }

  unreachable(e: unknown): Error {
    if (e instanceof EtcdUnreachableError) return e;
    if (isUnavailable(e) || (e as Error)?.message === 'no answer') {
      const msg = (e as Error)?.message ?? String(e);
      const cause = /connect E[A-Z]+ [^\s.]+(?:\.[^\s.]+)*(?::\d+)?/.exec(msg)?.[0] ?? msg.split('\n')[0]!;
      return new EtcdUnreachableError(this.endpoints, cause);
    }
    return e as Error;
  }

  async get<T>(key: string): Promise<Versioned<T> | undefined> {
    const res = await this.ns.get(key).exec();
    const kv = res.kvs[0];
    return kv ? decodeJson<T>(kv, this.prefix.length) : undefined;
  }

  async mustGet<T>(key: string): Promise<Versioned<T>> {
    const v = await this.get<T>(key);
    if (!v) throw new NotFoundError(key);
    return v;
  }

  /**
   * Raw list of a prefix, paginated, all pages at one revision (keysOnly: no values; onHeader: the
   * first reply's header, who answered; changedAfter: only keys changed after that revision).
   * `count`: the keys under the prefix, every one (etcd counts before the mod revision filter).
   */
  async listRaw(
    prefix: string,
    atRevision?: number,
    opts: { keysOnly?: boolean; onPage?: (kvs: IKeyValue[]) => void; onHeader?: (h: IResponseHeader) => void; changedAfter?: number } = {},
  ): Promise<{ kvs: IKeyValue[]; revision: number; count: number }> {
    const end = Buffer.from(prefixEnd(this.prefix + prefix), 'latin1');
    let revision = atRevision ?? 0;
    const page = (start: Buffer) => {
      const p = this.client.kv.range({
        key: start,
        range_end: end,
        limit: LIST_PAGE,
        ...(revision ? { revision } : {}),
        ...(opts.keysOnly ? { keys_only: true } : {}),
        ...(opts.changedAfter !== undefined ? { min_mod_revision: opts.changedAfter + 1 } : {}),
      });
      // Awaited below, if the list gets that far: one that fails meanwhile (a page handler threw,
      // or the client closed) is no unhandled rejection.
      p.catch(() => undefined);
      return p;
    };
    const kvs: IKeyValue[] = [];
    let next: Promise<IRangeResponse> | undefined = page(Buffer.from(this.prefix + prefix));
    let first = true;
    let count = 0;
    while (next) {
      const res: IRangeResponse = await next;
      next = undefined;
      if (first) {
        opts.onHeader?.(res.header);
        count = Number(res.count);
      }
      first = false;
      if (!revision) revision = Number(res.header.revision);
      // The next page is asked for before this one is handed over: etcd reads and sends it while
      // this process decodes (a list of 10,000 values is 20 pages; each waited for etcd in turn).
      // The call leaves only after a few turns of the client's own promises (its retry policy, its
      // token), so the page is handed over after one turn of the event loop, not at once.
      if (res.more && res.kvs.length > 0) {
        next = page(Buffer.concat([res.kvs[res.kvs.length - 1]!.key, Buffer.from([0])]));
        await new Promise((resolve) => setImmediate(resolve));
      }
      // With onPage, each page is handed over and dropped: a big prefix is never held raw at once.
      if (opts.onPage) opts.onPage(res.kvs);
      else kvs.push(...res.kvs);
    }
    return { kvs, revision, count };
  }

  /**
   * How many keys a prefix holds at a revision, and the newest mod revision among them (no values
   * read); with `changedSince`, also every key changed after that revision, with its mod revision
   * (keys only: etcd's count ignores the mod revision filter, so the keys are listed).
   */
  async rangeFacts(prefix: string, revision: number, changedSince?: number): Promise<RangeFacts> {
    const key = Buffer.from(this.prefix + prefix);
    const range_end = Buffer.from(prefixEnd(this.prefix + prefix), 'latin1');
    const [count, newest, changed] = await Promise.all([
      this.client.kv.range({ key, range_end, revision, count_only: true }),
      this.client.kv.range({ key, range_end, revision, keys_only: true, limit: 1, sort_order: 'Descend', sort_target: 'Mod' }),
      changedSince === undefined ? undefined : this.client.kv.range({ key, range_end, revision, keys_only: true, min_mod_revision: changedSince + 1 }),
    ]);
    return {
      count: Number(count.count),
      newest: Number(newest.kvs[0]?.mod_revision ?? 0),
      ...(changed ? { changed: changed.kvs.map((kv) => ({ key: kv.key.toString('utf8').slice(this.prefix.length), modRevision: Number(kv.mod_revision) })) } : {}),
    };
  }

  /** The header of a linearizable read: the store's revision now, and who answered (cluster and member). */
  async header(): Promise<IResponseHeader> {
    const key = Buffer.from(this.prefix);
    return (await this.client.kv.range({ key, range_end: Buffer.from(prefixEnd(this.prefix), 'latin1'), count_only: true })).header;
  }

  async list<T>(prefix: string): Promise<ListResult<T>> {
    const { kvs, revision } = await this.listRaw(prefix);
    return { items: kvs.map((kv) => decodeJson<T>(kv, this.prefix.length)), revision };
  }

  async countPrefix(prefix: string): Promise<number> {
    return this.ns.getAll().prefix(prefix).count();
  }

  /** Grants a lease (TTL in seconds) that is not kept alive: values bound to it expire. */
  async grantLease(ttlSec: number): Promise<string> {
    const res = await this.client.leaseClient.leaseGrant({ TTL: ttlSec, ID: 0 });
    return res.ID;
  }

  async revokeLease(id: string): Promise<void> {
    await this.client.leaseClient.leaseRevoke({ ID: id }).catch(() => undefined);
  }

  /** Compacts the store up to rev (tests use it to exercise informer relists). */
  async compact(rev: number): Promise<void> {
    await this.client.kv.compact({ revision: String(rev), physical: true });
  }

  close(): void {
    this.client.close();
  }
}

/** The exclusive end of a prefix range (etcd's "prefix end"). */
export function prefixEnd(prefix: string): string {
  const buf = Buffer.from(prefix, 'utf8');
  for (let i = buf.length - 1; i >= 0; i--) {
    if (buf[i]! < 0xff) {
      buf[i] = buf[i]! + 1;
      return buf.subarray(0, i + 1).toString('latin1');
    }
  }
  return '\0';
}

export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]);
}
