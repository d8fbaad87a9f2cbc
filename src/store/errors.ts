// Errors of the store layer, one class per kind. Conflict and Fenced are normal in a controller's
// life (re-read and decide again; stop writing); Unreachable is retried with back-off by
// long-running processes and reported with exit code 2 by the CLI.
import { EtcdLeaseInvalidError } from 'etcd3';

/** etcd's refusal of a token issued before the latest change of users or roles (ErrAuthOldRevision). */
export const oldAuthRevision = (e: unknown): boolean => /revision of auth store is old/.test((e as Error)?.message ?? '');

export class ConflictError extends Error {
  override name = 'ConflictError';
  readonly recoverable = true;
  constructor(message: string, readonly keys: string[] = []) {
    super(message);
  }
}

/** A fenced write whose election key is gone or was re-created: the writer is no longer leader. */
export class FencedError extends Error {
  override name = 'FencedError';
  readonly recoverable = true;
  constructor(readonly controller: string) {
    super(`${controller}: write refused, this process is no longer the leader (its election key is gone)`);
  }
}

/**
 * A stored value that is not JSON, read by code that needs it (a get or list outside the cache).
 * Names the key, so an operator can look at it or delete it; the cache keeps such values as
 * unreadable instead (reflector.ts).
 */
export class UnreadableValueError extends Error {
  override name = 'UnreadableValueError';
  readonly recoverable = false;
  constructor(readonly key: string, readonly reason: string) {
    super(`the value of ${key} cannot be read (${reason})`);
  }
}

export class NotFoundError extends Error {
  override name = 'NotFoundError';
  readonly recoverable = false;
  constructor(readonly key: string) {
    super(`not found: ${key}`);
  }
}

export class EtcdUnreachableError extends Error {
  override name = 'EtcdUnreachableError';
  readonly recoverable = true;
  constructor(readonly endpoints: string[], cause: string) {
    super(
      `cannot reach etcd at ${endpoints.join(', ')}: ${cause}. ` +
        'Check that etcd is running there (a local cluster: `make up`) or point jaco elsewhere with --endpoints / JACO_ENDPOINTS.',
    );
  }
}

/** An object too large for one etcd request (--max-request-bytes), refused before sending. */
export class TooLargeError extends Error {
  override name = 'TooLargeError';
  readonly recoverable = false;
  constructor(what: string, bytes: number, limit: number) {
    super(`${what} is ${formatMiB(bytes)}; etcd accepts at most ${formatMiB(limit)} per request (--max-request-bytes)`);
  }
}

/** A stored value that does not decode or does not match its schema. */
export class MalformedError extends Error {
  override name = 'MalformedError';
  readonly recoverable = false;
  constructor(readonly key: string, reason: string) {
    super(`malformed value at ${key}: ${reason}`);
  }
}

function formatMiB(n: number): string {
  return `${(n / 1048576).toFixed(2)} MiB (${n} bytes)`;
}

/** gRPC failures that mean "etcd is not there right now". */
export function isUnavailable(e: unknown): boolean {
  const err = e as { name?: string; message?: string; code?: number } | undefined;
  if (!err) return false;
  if (err.code === 14 || err.code === 4) return true;
  const name = err.name ?? '';
  const msg = err.message ?? '';
  return (
    name === 'GRPCConnectFailedError' ||
    name === 'GRPCDeadlineExceededError' ||
    name === 'GRPCUnavailableError' ||
    name === 'BrokenCircuitError' ||
    name === 'GRPCCancelledError' ||
    /ECONNREFUSED|UNAVAILABLE|No connection established|Deadline exceeded|Failed to connect|circuit/i.test(msg)
  );
}

/**
 * etcd refused a write bound to a lease it no longer has: revoked (`etcdctl lease revoke`),
 * expired, or gone with a restore from a snapshot. Retrying on that lease can never succeed:
 * whoever cached it must take a new one (AuditLog.leaseLost, KeptLease).
 */
export function isLeaseNotFound(e: unknown): boolean {
  if (e instanceof EtcdLeaseInvalidError) return true;
  return /requested lease not found/i.test((e as { message?: string } | undefined)?.message ?? '');
}
