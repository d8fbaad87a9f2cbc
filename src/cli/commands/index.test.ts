import { spawnSync } from 'node:child_process';
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

// What an operator's command loads at its start is most of its run (a CLI process is ~0.6 s of CPU
// here, most of it loading modules): prom-client and ajv's compiler are for the processes that
// serve metrics and for schemas the build did not compile, pino for the first logger that writes,
// never for a command that reads or writes and exits. The import graph cannot tell, as type-only
// imports are in it: a process can.
describe("an operator's command", () => {
  it("loads neither prom-client, ajv's compiler nor pino", () => {
    const serving = ['controller', 'agent', 'hollow-nodes', 'ingress', 'up'];
    const script = `
      import Module from 'node:module';
      const { COMMAND_MODULES } = await import(${JSON.stringify(new URL('./index.ts', import.meta.url).href)});
      for (const m of COMMAND_MODULES) if (!${JSON.stringify(serving)}.includes(m.names[0])) await m.load();
      console.log(JSON.stringify(Object.keys(Module._cache)));`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const loaded = (JSON.parse(r.stdout) as string[]).map((f) => f.replace(/.*node_modules\//, ''));
    expect(loaded.some((f) => f.startsWith('etcd3/'))).toBe(true); // the check sees what is loaded
    expect(loaded.filter((f) => f.startsWith('prom-client/') || f.startsWith('ajv/dist/compile/') || f.startsWith('pino/'))).toEqual([]);
  });
});
