// Tables for a node's runtime labels (`jaco node label`): parsing k=v … k-, the change applied to
// spec.labels (the agent's own stay the agent's), the labels placement matches (the operator's over
// the agent's), and what the rebalancer's conformance then sees as a broken nodeSelector.
import { describe, expect, it } from 'vitest';
import { brokenPlacement } from '../../controllers/rebalancer/conform.js';
import { labelProblem, labelsText, nodeAsDecided, nodeLabels, nodeSpecsToSeed, parseLabelArgs, relabel, UNREADABLE_NODE_SPEC, type LabelChanges, type NodeSpecSeed } from './nodes.js';
import { API_VERSION, type Node, type NodeSpec, type NodeSpecRecord } from './types.js';

const node = (agent?: Record<string, string>, runtime?: Record<string, string>): Node => ({
  apiVersion: API_VERSION,
  kind: 'Node',
  metadata: { name: 'node-1', ...(agent ? { labels: agent } : {}) },
  spec: { unschedulable: false, ...(runtime ? { labels: runtime } : {}) },
});

describe('parseLabelArgs', () => {
  it.each<[string[], LabelChanges]>([
    [['zone=a'], { set: { zone: 'a' }, remove: [] }],
    [['zone=a', 'disk-'], { set: { zone: 'a' }, remove: ['disk'] }],
    [['jaco.dev/tier=gold', 'empty='], { set: { 'jaco.dev/tier': 'gold', empty: '' }, remove: [] }],
  ])('%j', (args, want) => expect(parseLabelArgs(args)).toEqual(want));

  it.each<[string[], string]>([
    [[], 'give at least one label: KEY=VALUE to set, KEY- to remove'],
    [['zone'], '"zone" is neither KEY=VALUE nor KEY- (e.g. zone=a, zone-)'],
    [['=a'], '"=a" is neither KEY=VALUE nor KEY-'],
    [['zone=a b'], '"zone=a b": "a b" is not a valid label value'],
    [['-x-'], '"-x-": "-x" is not a valid label key'],
    [['zone=a', 'zone=b'], 'label zone is given twice'],
    [['zone=a', 'zone-'], 'label zone is given twice'],
  ])('refuses %j', (args, want) => expect(() => parseLabelArgs(args)).toThrow(want));
});

describe('relabel: the operator’s labels on spec, the agent’s untouched', () => {
  it.each<[string, Node, string[], ReturnType<typeof relabel>]>([
    ['sets a new label', node({ disk: 'ssd' }), ['zone=a'], { labels: { zone: 'a' }, set: { zone: 'a' }, removed: [] }],
    ['overrides an agent label', node({ zone: 'a' }), ['zone=b'], { labels: { zone: 'b' }, set: { zone: 'b' }, removed: [] }],
    ['removes its own label: none left', node({ disk: 'ssd' }, { zone: 'a' }), ['zone-'], { set: {}, removed: ['zone'] }],
    ['the same value again changes nothing', node({}, { zone: 'a' }), ['zone=a'], { labels: { zone: 'a' }, set: {}, removed: [] }],
    ['removes and sets in one go', node({}, { zone: 'a', rack: '1' }), ['zone-', 'rack=2'], { labels: { rack: '2' }, set: { rack: '2' }, removed: ['zone'] }],
  ])('%s', (_w, n, args, want) => expect(relabel(n, parseLabelArgs(args))).toEqual(want));

  it.each<[string, Node, string[], string]>([
    ['an agent label is the agent’s to remove', node({ disk: 'ssd' }), ['disk-'], "label disk on node node-1 is the agent's own (jaco agent --labels disk=ssd): change it there, or override it here with disk=VALUE"],
    ['a label nobody set (a typo)', node({ disk: 'ssd' }), ['dsik-'], 'node node-1 has no label dsik'],
  ])('refuses: %s', (_w, n, args, want) => expect(() => relabel(n, parseLabelArgs(args))).toThrow(want));
});

describe('the labels placement matches', () => {
  const selector = { placement: { nodeSelector: { zone: 'a' } } };
  it.each<[string, Node, Record<string, string>, string | undefined]>([
    ['the agent’s alone', node({ zone: 'a' }), { zone: 'a' }, undefined],
    ['the operator’s over the agent’s: the replica no longer fits', node({ zone: 'a' }, { zone: 'b' }), { zone: 'b' }, 'lacks zone=a (placement.nodeSelector)'],
    ['an operator label makes a node fit', node({ disk: 'ssd' }, { zone: 'a' }), { disk: 'ssd', zone: 'a' }, undefined],
    ['no labels at all', node(), {}, 'lacks zone=a (placement.nodeSelector)'],
  ])('%s', (_w, n, labels, broken) => {
    expect(nodeLabels(n)).toEqual(labels);
    expect(brokenPlacement(selector.placement, 'node-1', nodeLabels(n))).toBe(broken);
  });

  it('shows the runtime labels beside the agent’s, with the agent value one hides', () =>
    expect(labelsText(node({ disk: 'ssd', zone: 'a' }, { zone: 'b', rack: '7' }))).toBe('disk=ssd, zone=b (runtime, agent: a), rack=7 (runtime)'));

  it('the agent’s --labels and jaco node label share one syntax', () => {
    expect(labelProblem('zone', 'a')).toBeUndefined();
    expect(labelProblem('zone', 'a'.repeat(64))).toContain('not a valid label value');
  });
});

// What operators decided (nodespecs/<host>) joined with what the agent reports (nodes/<host>).
describe('nodeAsDecided', () => {
  const decided = (spec: NodeSpec): NodeSpecRecord => ({ apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name: 'node-1' }, spec });
  const legacy: Node = { ...node({ zone: 'a' }), spec: { unschedulable: true, trusted: true } };
  it.each<[string, Node, NodeSpecRecord | 'unreadable' | undefined, NodeSpec]>([
    ['no nodespecs key: the spec an older CLI left in nodes/ is honoured (an upgrade uncordons nothing)', legacy, undefined, { unschedulable: true, trusted: true }],
    ['a nodespecs key replaces it whole (an agent rewriting nodes/ changes nothing)', legacy, decided({ labels: { zone: 'b' } }), { labels: { zone: 'b' } }],
    ['an empty decision: nothing decided', legacy, decided({}), {}],
    ['nodespecs unreadable: read as cordoned', node(), 'unreadable', UNREADABLE_NODE_SPEC],
  ])('%s', (_name, n, d, want) => {
    const joined = nodeAsDecided(n, d);
    expect(joined.spec).toEqual(want);
    expect(joined.metadata).toBe(n.metadata);
  });

  it('returns the node itself when nothing is joined (no copy per node per pass)', () => {
    expect(nodeAsDecided(legacy, undefined)).toBe(legacy);
  });
});


// The first nodespecs/<host> of each node, made when its agent gets its etcd user: the upgrade
// from before the split carried over once, never over an operator's decision.
describe('nodeSpecsToSeed', () => {
  const legacy: Node = { ...node(), spec: { unschedulable: true, labels: { zone: 'b' } } };
  const plain: Node = { ...node(), spec: {} };
  it.each<[string, [string, Node | 'unreadable'][], string[], string[], NodeSpecSeed[]]>([
    ['an old spec in nodes/ is carried over', [['a', legacy]], [], [], [{ host: 'a', spec: legacy.spec!, from: 'nodes' }]],
    ['a node without one gets an empty decision', [['a', plain]], [], [], [{ host: 'a', spec: {}, from: 'none' }]],
    ['an old spec that decides nothing is carried over as it is', [['a', { ...plain, spec: { unschedulable: false } }]], [], [], [{ host: 'a', spec: { unschedulable: false }, from: 'nodes' }]],
    ['a nodespecs key already there is never overwritten', [['a', legacy]], ['a'], [], []],
    ['an unreadable nodespecs key counts as there', [['a', plain]], ['a'], ['a'], []],
    ['nodes/ unreadable: cordoned (what operators decided is not known)', [['a', 'unreadable']], [], [], [{ host: 'a', spec: UNREADABLE_NODE_SPEC, from: 'unreadable' }]],
    ['a named node not yet registered gets an empty one before its agent joins', [], [], ['b'], [{ host: 'b', spec: {}, from: 'none' }]],
    ['sorted by host, each once', [['c', plain], ['a', legacy]], ['x'], ['a', 'b'], [
      { host: 'a', spec: legacy.spec!, from: 'nodes' },
      { host: 'b', spec: {}, from: 'none' },
      { host: 'c', spec: {}, from: 'none' },
    ]],
  ])('%s', (_name, nodes, specKeys, named, want) => expect(nodeSpecsToSeed(new Map(nodes), new Set(specKeys), named)).toEqual(want));
});
