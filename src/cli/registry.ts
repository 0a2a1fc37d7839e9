import * as fs from 'fs';
import * as path from 'path';
import { Command } from './command';

/**
 * Every command in `./commands`, ordered by name. Each module there exports `command: Command`;
 * adding a subcommand is adding one file.
 */
export function loadCommands(): Command[] {
  const dir = path.join(__dirname, 'commands');
  const files = fs.readdirSync(dir)
    .filter(f => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'))
    .sort();
  const commands: Command[] = [];
  for (const file of files) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require(path.join(dir, file)) as { command?: Command };
    if (mod.command) {
      commands.push(mod.command);
    }
  }
  return commands.sort((a, b) => a.name.localeCompare(b.name));
}
