import { describe, expect, it } from 'vitest';
import { planCopies, type CopyPlan, type CopySetInput } from './copyset.js';

/** A compact world: node keys, what each node's replicas use, the objects and the copies that exist. */
interface World {
  keys?: Record<string, string | undefined>;
  uses?: Record<string, Record<string, string[]>>;
  unknownUse?: string[];
  sources?: Record<string, string>;
  copies?: Record<string, Record<string, { uid: string; nodeKey: string }>>;
}

function input(w: World): CopySetInput {
  return {
    nodes: new Map(Object.entries(w.keys ?? {}).map(([n, key]) => [n, { ...(key ? { key } : {}), modRevision: 1 }])),
    uses: new Map(Object.entries(w.uses ?? {}).map(([n, m]) => [n, new Map(Object.entries(m))])),
    unknownUse: new Set(w.unknownUse ?? []),
    sources: new Map(Object.entries(w.sources ?? {}).map(([f, uid]) => [f, { uid }])),
    copies: new Map(Object.entries(w.copies ?? {}).map(([n, m]) => [n, new Map(Object.entries(m).map(([f, c], i) => [f, { ...c, modRevision: 10 + i }]))])),
  };
}

/** The plan in one line per item, as a reader would say it. */
function said(p: CopyPlan): string[] {
  return [
    ...p.write.map((w) => `write ${w.node} ${w.file} (${w.reason}) for ${w.replicas.join(',')}`),
    ...p.remove.map((r) => `remove ${r.node} ${r.file}`),
    ...p.waiting.map((w) => `wait ${w.node} ${w.file} (${w.why})`),
  ];
}

const db = 'secret/db_password';
const conf = 'config/app.conf';

const cases: [string, World, string[]][] = [
  ['nothing used, nothing copied', { keys: { n1: 'k1' } }, []],
  [
    'a node whose replicas use a secret gets a copy; a node whose replicas do not, none',
    { keys: { n1: 'k1', n2: 'k2' }, uses: { n1: { [db]: ['shop-db-1'] }, n2: {} }, sources: { [db]: 'u1' } },
    ['write n1 secret/db_password (missing) for shop-db-1'],
  ],
  [
    'two replicas on one node share one copy; a config is copied like a secret',
    { keys: { n1: 'k1' }, uses: { n1: { [db]: ['shop-api-1', 'shop-api-2'], [conf]: ['shop-api-1'] } }, sources: { [db]: 'u1', [conf]: 'c1' } },
    ['write n1 config/app.conf (missing) for shop-api-1', 'write n1 secret/db_password (missing) for shop-api-1,shop-api-2'],
  ],
  ['an up-to-date copy is left alone', { keys: { n1: 'k1' }, uses: { n1: { [db]: ['r'] } }, sources: { [db]: 'u1' }, copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } } } }, []],
  [
    'the last replica left the node: its copy is removed',
    { keys: { n1: 'k1' }, uses: { n1: {} }, sources: { [db]: 'u1' }, copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } } } },
    ['remove n1 secret/db_password'],
  ],
  [
    'a node that left the cluster (no node, no replicas): its copies go',
    { keys: {}, sources: { [db]: 'u1' }, copies: { gone: { [db]: { uid: 'u1', nodeKey: 'k9' } } } },
    ['remove gone secret/db_password'],
  ],
  [
    'the node published a new key (its state directory was lost): sealed again to it',
    { keys: { n1: 'k1-new' }, uses: { n1: { [db]: ['r'] } }, sources: { [db]: 'u1' }, copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } } } },
    ['write n1 secret/db_password (node_key_changed) for r'],
  ],
  [
    'the secret was deleted and made again under the same name: the copy follows the new one',
    { keys: { n1: 'k1' }, uses: { n1: { [db]: ['r'] } }, sources: { [db]: 'u2' }, copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } } } },
    ['write n1 secret/db_password (source_changed) for r'],
  ],
  [
    'a node with no key yet (an older agent) waits; nothing is sealed to nobody',
    { keys: { n1: undefined }, uses: { n1: { [db]: ['r'] } }, sources: { [db]: 'u1' } },
    ['wait n1 secret/db_password (node_has_no_key)'],
  ],
  [
    'a secret removed by hand while used: the copy on the node is kept (the last place its value is)',
    { keys: { n1: 'k1' }, uses: { n1: { [db]: ['r'] } }, sources: {}, copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } } } },
    ['wait n1 secret/db_password (source_missing)'],
  ],
  [
    'a node with an unreadable desired key: what it uses is unknown, so none of its copies is removed',
    { keys: { n1: 'k1' }, uses: { n1: {} }, unknownUse: ['n1'], sources: { [db]: 'u1' }, copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } } } },
    [],
  ],
  [
    'a rotation: the service moves from db_password to db_password_v2 on n1, n2 still runs the old revision',
    {
      keys: { n1: 'k1', n2: 'k2' },
      uses: { n1: { 'secret/db_password_v2': ['a-1'] }, n2: { [db]: ['a-2'] } },
      sources: { [db]: 'u1', 'secret/db_password_v2': 'u2' },
      copies: { n1: { [db]: { uid: 'u1', nodeKey: 'k1' } }, n2: { [db]: { uid: 'u1', nodeKey: 'k2' } } },
    },
    ['write n1 secret/db_password_v2 (missing) for a-1', 'remove n1 secret/db_password'],
  ],
];

describe('the copy set: which node needs which secret', () => {
  it.each(cases)('%s', (_what, world, expected) => expect(said(planCopies(input(world)))).toEqual(expected));

  it('is deterministic: nodes and files in name order, whatever order they came in', () => {
    const w: World = { keys: { b: 'kb', a: 'ka' }, uses: { b: { 'secret/z': ['r1'], 'secret/a': ['r2'] }, a: { 'config/c': ['r3'] } }, sources: { 'secret/z': 'u', 'secret/a': 'u', 'config/c': 'u' } };
    expect(said(planCopies(input(w)))).toEqual(['write a config/c (missing) for r3', 'write b secret/a (missing) for r2', 'write b secret/z (missing) for r1']);
  });
});
