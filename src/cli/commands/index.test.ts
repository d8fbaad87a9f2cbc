import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../main.js';
import { COMMAND_MODULES, commandNamed } from './index.js';

describe('the command table', () => {
  it('names exactly the top-level commands each module registers', async () => {
    for (const m of COMMAND_MODULES) {
      const program = new Command('jaco');
      (await m.load())(program);
      expect(program.commands.map((c) => c.name())).toEqual(m.names);
    }
  });

  it('a run registers only the command it names; help and unknown words get every command', async () => {
    const all = COMMAND_MODULES.flatMap((m) => m.names);
    expect((await buildProgram([])).commands.map((c) => c.name())).toEqual(all);
    expect((await buildProgram(['--help'])).commands.map((c) => c.name())).toEqual(all);
    expect((await buildProgram(['statsu'])).commands.map((c) => c.name())).toEqual(all);
    expect((await buildProgram(['--prefix', 'p', 'describe', 'node', 'n1'])).commands.map((c) => c.name())).toEqual(['get', 'describe']);
    expect((await buildProgram(['node', 'drain', 'n1'])).commands.find((c) => c.name() === 'node')?.commands.map((c) => c.name())).toContain('drain');
  });

  it.each([
    [['get', 'replicas'], 'get'],
    [['--endpoints', 'http://127.0.0.1:2379', '--prefix', '/x', 'status', 'app'], 'status'],
    [['--timings=fast', 'up', '--nodes', '3'], 'up'],
    [['--prefix=/x', 'delete', 'deployment', 'a'], 'delete'],
    [['--help'], undefined],
    [['--version'], undefined],
    [['help', 'get'], undefined],
    [['nope'], undefined],
    [[], undefined],
    // A global option's value that happens to be a command's name is not the command.
    [['--prefix', 'get', 'status'], 'status'],
  ] as const)('%j names %s', (args, name) => {
    expect(commandNamed(args)).toBe(name);
  });
});
