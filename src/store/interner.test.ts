import { describe, expect, it } from 'vitest';
import { Interner, shareAt } from './interner.js';

describe('Interner', () => {
  it('hands out one frozen object per distinct value; a different value is its own', () => {
    const i = new Interner();
    const a = i.share({ image: 'x', env: { A: '1' } });
    const b = i.share({ image: 'x', env: { A: '1' } });
    const c = i.share({ image: 'x', env: { A: '2' } });
    expect(b).toBe(a);
    expect(c).not.toBe(a);
    expect(i.size).toBe(2);
    expect(Object.isFrozen(a.env)).toBe(true);
    expect(() => ((a.env as Record<string, string>).A = 'changed')).toThrow(TypeError);
  });

  it('shares the subtree at a path, leaving the rest of each value its own', () => {
    const i = new Interner();
    const one = { metadata: { name: 'r1' }, spec: { node: 'n1', template: { image: 'x' } } };
    const two = { metadata: { name: 'r2' }, spec: { node: 'n2', template: { image: 'x' } } };
    shareAt(i, one, ['spec', 'template']);
    shareAt(i, two, ['spec', 'template']);
    expect(two.spec.template).toBe(one.spec.template);
    expect(Object.isFrozen(two.spec)).toBe(false);
    shareAt(i, { spec: 'not an object' }, ['spec', 'template']); // a value without the path is left alone
  });
});
