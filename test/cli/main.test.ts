import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { loadCommands } from '../../src/cli/registry';
import { runCli } from '../../src/cli/run-cli';

const root = path.join(__dirname, '..', '..');

describe('disagg binary', () => {
  test('src/cli/main.ts starts with a node shebang', () => {
    expect(fs.readFileSync(path.join(root, 'src/cli/main.ts'), 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
  });

  test('`plan --json` in a real process prints parseable JSON and exits 0', () => {
    // GIVEN the real entry point run by node through ts-node
    // WHEN
    const result = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', 'src/cli/main.ts', 'plan', '--json'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    // THEN
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const json = JSON.parse(result.stdout);
    expect(json.fits).toBe(true);
    expect(json.model.name).toBe('llama-3.3-70b');
  });

  test('a bad flag in a real process exits 2 with nothing on stdout', () => {
    const result = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', 'src/cli/main.ts', 'plan', '--model', 'nope'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/unknown model 'nope'/);
  });

  test('commands are discovered from src/cli/commands', () => {
    expect(loadCommands().map(c => c.name)).toContain('plan');
  });

  test('every command answers --help and -h with its help and exit 0, as the README and its errors say', async () => {
    for (const command of loadCommands()) {
      for (const flag of ['--help', '-h']) {
        const out: string[] = [];
        const err: string[] = [];
        // other flags around it do not matter
        const code = await runCli([command.name, '--json', flag], { out: (t) => out.push(t), err: (t) => err.push(t) });
        expect({ command: command.name, flag, code, err }).toEqual({ command: command.name, flag, code: 0, err: [] });
        expect(out.join('\n')).toBe(command.help);
        expect(command.help).toMatch(new RegExp(`^Usage: disagg ${command.name}\\b`));
      }
    }
  });

  test('no command lists a flag twice in its help (with two defaults, as plan once did)', () => {
    for (const command of loadCommands()) {
      const flags = [...command.help.matchAll(/^ {2}(--[a-z][a-z0-9-]*)/gm)].map(m => m[1]);
      const twice = flags.filter((f, i) => flags.indexOf(f) !== i);
      expect({ command: command.name, twice }).toEqual({ command: command.name, twice: [] });
    }
  });

  test('`disagg help <command>` is that command\'s help; an unknown one is a usage error naming the known', async () => {
    const run = async (...argv: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(argv, { out: (t) => out.push(t), err: (t) => err.push(t) });
      return { code, out: out.join('\n'), err: err.join('\n') };
    };
    for (const command of loadCommands()) {
      expect(await run('help', command.name)).toEqual({ code: 0, out: command.help, err: '' });
    }
    const bad = await run('help', 'deploy');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/^disagg help: unknown command 'deploy'; known: local, plan, /);
    // AND the top-level help says both ways
    expect((await run('help')).out).toMatch(/'disagg <command> --help' or 'disagg help <command>'/);
  });

  test('--version, -V and version print package.json\'s version, in a real process too', async () => {
    const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version;
    for (const flag of ['--version', '-V', 'version']) {
      const out: string[] = [];
      expect(await runCli([flag], { out: (t) => out.push(t), err: () => undefined })).toBe(0);
      expect(out).toEqual([version]);
    }
    const r = spawnSync('npx', ['ts-node', '--transpile-only', path.join(root, 'src', 'cli', 'main.ts'), '--version'], { encoding: 'utf8', cwd: root });
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe(version);
  });
});
