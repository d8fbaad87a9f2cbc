import { describe, expect, it } from 'vitest';
import type { NodeDrain } from '../api/types.js';
import { uncordonText } from './nodes.js';

const drain = (state?: string) => ({ apiVersion: 'jaco.dev/v1', kind: 'NodeDrain', metadata: { name: 'node-2' }, spec: { node: 'node-2' }, ...(state ? { status: { state } } : {}) }) as unknown as NodeDrain;

describe('uncordonText', () => {
  const cases: { name: string; changed: boolean; d?: NodeDrain; want: string }[] = [
    { name: 'cordoned: uncordoned', changed: true, want: 'node/node-2 uncordoned\n' },
    { name: 'not cordoned, no drain', changed: false, want: 'node/node-2 not cordoned: already schedulable\n' },
    { name: 'a completed drain no longer holds it', changed: false, d: drain('completed'), want: 'node/node-2 not cordoned: already schedulable\n' },
    { name: 'an aborted one neither', changed: true, d: drain('aborted'), want: 'node/node-2 uncordoned\n' },
    {
      name: 'a drain under way is named, with how to stop it',
      changed: false,
      d: drain('draining'),
      want: 'node/node-2 not cordoned, but it is being drained (draining): it takes no new replicas until the drain ends; to stop it: jaco node drain node-2 --cancel\n',
    },
    { name: 'a drain not picked up yet is pending', changed: true, d: drain(), want: expect.stringContaining('uncordoned, but it is being drained (pending)') as unknown as string },
  ];
  for (const c of cases) it(c.name, () => expect(uncordonText('node-2', c.changed, c.d)).toEqual(c.want));
});
