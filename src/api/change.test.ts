import { describe, expect, it } from 'vitest';
import { summarizeChange } from './change.js';

const D1 = `sha256:${'1'.repeat(64)}`;
const D2 = `sha256:${'2'.repeat(64)}`;

describe('summarizeChange', () => {
  it.each([
    ['a new service', undefined, { web: { image: 'a:1' } }, 'created with web'],
    ['an image changed (its new pin goes without saying)', { web: { image: 'a:1', pinnedImage: `r/a:1@${D1}` } }, { web: { image: 'a:2', pinnedImage: `r/a:2@${D2}` } }, 'web: image a:1 → a:2'],
    ['the same tag at a new digest', { web: { image: 'a:1', pinnedImage: `r/a:1@${D1}` } }, { web: { image: 'a:1', pinnedImage: `r/a:1@${D2}` } }, 'web: digest sha256:111111111111 → sha256:222222222222'],
    ['a service added and one removed', { web: { image: 'a:1' } }, { api: { image: 'b:1' } }, '+api; -web'],
  ])('%s', (_, prev, next, want) => {
    expect(summarizeChange(prev ? { services: prev } : undefined, { services: next })).toBe(want);
  });
});
