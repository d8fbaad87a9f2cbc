import { describe, expect, it } from 'vitest';
import type { ContainerFacts } from './facts.js';
import { RunningClock } from './running-clock.js';

const T = Date.parse('2026-11-21T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const ctr = (id: string, o: Partial<ContainerFacts> = {}): ContainerFacts =>
  ({ id, name: id, replica: id, deployment: 'd', service: 's', revision: 1, specHash: 'h', image: 'i', state: 'running', health: 'none', exitCode: 0, oomKilled: false, createdAt: iso(T), startedAt: iso(T), ports: [], pid: 1, ...o }) as ContainerFacts;

describe('RunningClock: how long a container has run, on one monotonic clock', () => {
  // [what, passes as [monotonic now, wall now, containers], runningForMs of the last pass by id]
  const rows: [string, [number, number, ContainerFacts[]][], Record<string, number | undefined>][] = [
    ['first seen: what the wall clock says it has run', [[1000, T + 3000, [ctr('a')]]], { a: 3000 }],
    ['the wall clock steps back 10 minutes: the count goes on', [[1000, T + 3000, [ctr('a')]], [6000, T + 8000 - 600_000, [ctr('a')]]], { a: 8000 }],
    ['the wall clock steps forward 10 minutes: the count goes on', [[1000, T + 3000, [ctr('a')]], [6000, T + 8000 + 600_000, [ctr('a')]]], { a: 8000 }],
    ['a start stamp in the wall clock\'s future (stepped back before first seen): nothing yet', [[1000, T - 600_000, [ctr('a')]]], { a: 0 }],
    ['restarted (a new start stamp): anchored afresh', [[1000, T + 3000, [ctr('a')]], [9000, T + 11_000, [ctr('a', { startedAt: iso(T + 10_000) })]]], { a: 1000 }],
    ['not running: no count', [[1000, T + 3000, [ctr('a', { state: 'exited' })]]], { a: undefined }],
    ['gone and back with the same stamp: its anchor was forgotten, taken again from the wall clock', [[1000, T + 3000, [ctr('a')]], [2000, T + 4000, []], [3000, T + 5000, [ctr('a')]]], { a: 5000 }],
  ];
  it.each(rows)('%s', (_what, passes, want) => {
    let mono = 0;
    const clock = new RunningClock(() => mono);
    let last: ContainerFacts[] = [];
    for (const [m, wall, cs] of passes) {
      mono = m;
      last = clock.stamp(cs, wall);
    }
    expect(Object.fromEntries(last.map((c) => [c.id, c.runningForMs]))).toEqual(Object.fromEntries(Object.keys(want).map((id) => [id, want[id]])));
  });
});
