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
});
