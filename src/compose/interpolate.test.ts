import { describe, expect, it } from 'vitest';
import { interpolate, InterpolationError, parseEnvFile } from './interpolate.js';

const vars: Record<string, string> = { NAME: 'web', EMPTY: '', PORT: '8080', NESTED: 'inner' };
const lookup = (n: string) => vars[n];

describe('interpolate (as Docker Compose)', () => {
  it.each([
    ['$NAME', 'web'],
    ['${NAME}', 'web'],
    ['${NAME}-1', 'web-1'],
    ['$NAME.x', 'web.x'],
    ['${MISSING:-fallback}', 'fallback'],
    ['${EMPTY:-fallback}', 'fallback'],
    ['${EMPTY-fallback}', ''],
    ['${MISSING-fallback}', 'fallback'],
    ['${NAME:+set}', 'set'],
    ['${EMPTY:+set}', ''],
    ['${EMPTY+set}', 'set'],
    ['${MISSING+set}', ''],
    ['${MISSING:-${NESTED}}', 'inner'],
    ['${MISSING:-${ALSO_MISSING:-deep}}', 'deep'],
    ['$$NAME', '$NAME'],
    ['cost: $$5', 'cost: $5'],
    ['a lone $ stays', 'a lone $ stays'],
    ['no variables', 'no variables'],
    ['${PORT}:${PORT}', '8080:8080'],
  ])('%s → %s', (text, want) => expect(interpolate(text, lookup).value).toBe(want));

  it('an unset variable without a default is empty and reported', () => {
    expect(interpolate('x${MISSING}y$MISSING', lookup)).toEqual({ value: 'xy', unset: ['MISSING'] });
  });

  it.each([
    ['${MISSING:?set it}', /required variable MISSING is missing a value: set it/],
    ['${EMPTY:?must not be empty}', /required variable EMPTY is empty: must not be empty/],
    ['${MISSING?}', /required variable MISSING is missing a value: MISSING must be set/],
    ['${NAME', /without a closing/],
    ['${1BAD}', /does not start with a variable name/],
    ['${NAME!x}', /unexpected "!x"/],
  ])('%s is refused', (text, msg) => {
    expect(() => interpolate(text, lookup)).toThrow(InterpolationError);
    expect(() => interpolate(text, lookup)).toThrow(msg);
  });

  it('${VAR?msg} accepts an empty value; ${VAR:?msg} does not', () => {
    expect(interpolate('${EMPTY?unset}', lookup).value).toBe('');
  });
});

describe('.env files', () => {
  it('reads KEY=VALUE, comments, export, quotes and inline comments as compose does', () => {
    const env = parseEnvFile(['# comment', 'A=1', 'export B=two', 'C="quoted # not a comment"', "D='single $x'", 'E=value # a comment', 'F=', 'G', 'H="line\\nbreak"', ''].join('\n'));
    expect(Object.fromEntries(env)).toEqual({ A: '1', B: 'two', C: 'quoted # not a comment', D: 'single $x', E: 'value', F: '', G: '', H: 'line\nbreak' });
  });
});
