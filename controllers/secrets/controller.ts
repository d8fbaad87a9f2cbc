// The secrets controller on the shared runtime (`jaco controller secrets|all`): leader-elected and
// fenced like the others, it is the only writer of every node's copies (copies/<node>/), of the
// published cluster key (clusterkey) and of secrets' re-sealing at rest. It alone holds the cluster
// key file (--secrets-key-file): the CLI seals to the public half it publishes, and each agent
// opens only its own copies with its own key.
//
// A controller of its own rather than a pass of the scheduler: it is the one process that needs
// the cluster key, its failures (a missing key file, a secret it cannot open) must not touch
// placement, and its reads (secrets, configs, copies) are no other controller's.
import { OpenError, open, seal, type Sealed } from '../../src/secrets/seal.js';
import { ClusterKeySource } from '../../src/secrets/keyfile.js';
import type { ClusterKey, Config, ImageSettings, Node, NodeCopy, Registry, ReplicaDesired, Secret } from '../../src/api/types.js';
import { byRest, type Cache } from '../../src/runtime/cache.js';
import type { ControllerSpec } from '../../src/runtime/runner.js';
import type { Versioned } from '../../src/store/store.js';
import type { Timings } from '../../src/timings.js';
import type { Logger } from '../../src/observability/log.js';
import { decideSecrets, type SecretProblem, type SecretsCrypto, type SecretsDecision, type SecretsSnapshot } from './decide.js';
import { countSecretsMetric, secretsMetrics, setWaiting, type SecretsMetricEvent } from './metrics.js';

export const SECRETS_READS = ['nodes', 'desired', 'secrets', 'configs', 'copies', 'clusterkey', 'registries', 'imageSettings'] as const;

export interface SecretsOptions {
  /** The cluster key file (jaco controller --secrets-key-file); absent: configs only. */
  keyFile?: string;
  /** The sealing the pass does (tests and the simulation give their own). */
  crypto?: SecretsCrypto;
}

/** Reads the pass's snapshot from the cache. */
export function secretsSnapshot(cache: Cache): SecretsSnapshot {
  const desiredSrc = cache.kind<ReplicaDesired>('desired');
  const desired = new Map<string, Versioned<ReplicaDesired>[]>();
  for (const [key, v] of desiredSrc.items) {
    const node = desiredSrc.rest(key).split('/')[0]!;
    (desired.get(node) ?? desired.set(node, []).get(node)!).push(v);
  }
  const unknownUse = new Set<string>();
  for (const key of desiredSrc.unreadable.keys()) if (!desiredSrc.items.has(key)) unknownUse.add(desiredSrc.rest(key).split('/')[0]!);
  const byName = <T extends { metadata: { name: string } }>(src: ReturnType<Cache['kind']>) => new Map([...(src.items as Map<string, Versioned<T>>).values()].map((v) => [v.value.metadata.name, v]));
  const key = cache.kind<ClusterKey>('clusterkey');
  const settings = [...cache.kind<ImageSettings>('imageSettings').items.values()][0]?.value.spec;
  return {
    revision: cache.revision,
    nodes: byRest(cache.kind<Node>('nodes')),
    desired,
    unknownUse,
    secrets: byName<Secret>(cache.kind('secrets')),
    configs: byName<Config>(cache.kind('configs')),
    copies: byRest(cache.kind<NodeCopy>('copies')),
    registries: [...cache.kind<Registry>('registries').items.values()].map((v) => v.value),
    ...(settings ? { imageSettings: settings } : {}),
    ...(key.items.size ? { clusterKey: [...key.items.values()][0] } : {}),
  };
}

/** Real sealing with the cluster key file, read again when it changes (a rotation needs no restart). */
export function keyFileCrypto(path: string | undefined, log?: Logger): SecretsCrypto {
  const source = path ? new ClusterKeySource(path, (m) => log?.error({ keyFile: path }, m)) : undefined;
  return {
    clusterKeys: () => source?.current(),
    open: (sealed: Sealed, aad: string) => {
      const ring = source?.current();
      if (!ring) throw new OpenError('unknown_key', 'no cluster key file');
      return open(sealed, ring.byId, aad);
    },
    seal,
  };
}

/** The secrets controller as the runtime runs it. */
export function secretsController(_timings: Timings, opts: SecretsOptions = {}): ControllerSpec<undefined, SecretsSnapshot, SecretsMetricEvent, SecretsDecision> {
  let log: Logger | undefined;
  let crypto = opts.crypto;
  /** Problems already logged (each once, until it goes away and comes back). */
  let said = new Set<string>();
  return {
    name: 'secrets',
    reads: SECRETS_READS,
    initialState: () => undefined,
    snapshot: ({ cache }) => secretsSnapshot(cache),
    decide: (_state, snap, now) => decideSecrets(snap, now, (crypto ??= keyFileCrypto(opts.keyFile, log))),
    countMetric: countSecretsMetric,
    attach(runner) {
      log = runner.log;
      if (!opts.keyFile && !opts.crypto) log.warn('no cluster key file (--secrets-key-file): configs are copied to nodes, secrets are not');
      return () => undefined;
    },
    afterPass: (_state, d) => {
      const now = new Set<string>();
      const counts = new Map<string, number>();
      for (const p of d.problems) {
        counts.set(p.why, (counts.get(p.why) ?? 0) + 1);
        const k = `${p.file}|${p.why}`;
        now.add(k);
        if (!said.has(k)) warn(log, p);
      }
      said = now;
      setWaiting(counts);
      secretsMetrics.staleAtRest.set(d.staleAtRest);
    },
    leadershipChanged: (leading) => {
      said = new Set();
      if (!leading) setWaiting(new Map());
    },
  };
}

function warn(log: Logger | undefined, p: SecretProblem): void {
  // Names and reasons only: never a value (there is none here to print).
  log?.warn({ file: p.file, why: p.why, detail: p.detail }, `${p.file} cannot be copied: ${p.why}`);
}
