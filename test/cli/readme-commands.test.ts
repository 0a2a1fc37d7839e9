import * as fs from 'fs';
import * as path from 'path';
import { disagg, tmpdir } from './util';
import { parseOptions, RENAMED_FLAGS } from '../../src/cli/command';
import { loadCommands } from '../../src/cli/registry';

// Every `disagg` command the README and the examples' READMEs show, as a new user copies it: the flags
// must be the command's own (parsed by the command's parser), none of them renamed, and the quick ones
// run as written with the exit code the help documents. The slow ones (a simulated day, a loopback
// run) are parsed here and run by their own tests.
const ROOT = path.join(__dirname, '..', '..');
const DOCS = ['README.md', ...fs.readdirSync(path.join(ROOT, 'examples')).map(d => path.join('examples', d, 'README.md'))]
  .filter(f => fs.existsSync(path.join(ROOT, f)));
const COMMANDS = loadCommands();
const NAMES = COMMANDS.map(c => c.name);

/** Values for the placeholders the docs write (`N`, `<type>`, `vpc-...`). */
const SAMPLES: Record<string, string> = {
  'N': '2',
  'M': '2',
  '<n>': '2',
  '<type>': 'p5en.48xlarge',
  '<region>': 'us-east-1',
  'vpc-...': 'vpc-0123456789abcdef0',
  'cr-...': 'cr-0123456789abcdef0',
  'DIR': 'tokenizer-dir',
  'FILE': 'text.txt',
};
/** A value for a flag the docs leave open at the end of a code span. */
const FLAG_SAMPLES: Record<string, string> = { '--region': 'us-east-1', '--subnets': 'subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2', '--azs': 'us-east-2a,us-east-2b' };

interface DocCommand { readonly doc: string; readonly line: number; readonly name: string; readonly args: string[] }

function docCommands(): DocCommand[] {
  const found: DocCommand[] = [];
  for (const doc of DOCS) {
    const lines = fs.readFileSync(path.join(ROOT, doc), 'utf8').split('\n');
    lines.forEach((text, i) => {
      // In code (a span or a block): `disagg <command> [flags]` up to a backtick, a comment, a pipe or `&&`.
      for (const m of text.matchAll(/(?:^|[`$\s])(?:npx )?disagg (\w+)((?: +[^`\s#|&]+)*)/g)) {
        // (a name in prose, `disagg plan / synth / the simulator`, is no command)
        if (!NAMES.includes(m[1]) || /^ +[^-\s]/.test(m[2])) continue;
        const args = m[2].trim().split(/\s+/).filter(a => a !== '' && a !== '...' && a !== '\\')
          .map(a => SAMPLES[a] ?? a);
        found.push({ doc, line: i + 1, name: m[1], args });
      }
    });
  }
  return found;
}

const FOUND = docCommands();

/** The args with a value added to a flag the span leaves open, and `--out` where the command writes. */
function runnable(c: DocCommand): string[] {
  const command = COMMANDS.find(x => x.name === c.name)!;
  const args = [...c.args];
  const last = args[args.length - 1];
  if (last?.startsWith('--') && (command.options[last.slice(2)] as { type?: string } | undefined)?.type === 'string') {
    args.push(FLAG_SAMPLES[last] ?? '1');
  }
  return args;
}

describe('the commands the READMEs show', () => {
  test('there are many, of every command', () => {
    expect(FOUND.length).toBeGreaterThanOrEqual(20);
    expect(new Set(FOUND.map(c => c.name))).toEqual(new Set(['plan', 'synth', 'simulate', 'local', 'preflight']));
  });

  test.each(FOUND.map(c => [`${c.doc}:${c.line}`, c] as const))('%s: its flags are the command\'s own, by their current names', (_where, c) => {
    const command = COMMANDS.find(x => x.name === c.name)!;
    const warnings: string[] = [];
    const args = runnable(c).filter(a => a !== '--help');
    // THEN the command's own parser takes them as written, and none is an old name kept as an alias
    expect(() => parseOptions(args, command.options, { out: () => undefined, err: t => warnings.push(t) })).not.toThrow();
    expect(warnings).toEqual([]);
  });

  test('every flag a "What `disagg X` does" section names in its prose is a flag of X (or of a command the paragraph names)', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').replace(/```[\s\S]*?```/g, '');
    const sections = readme.split(/^## /m).filter(sec => /^What `disagg (\w+)`/.test(sec));
    expect(sections.length).toBeGreaterThanOrEqual(4);
    const strays: string[] = [];
    for (const section of sections) {
      const own = /^What `disagg (\w+)`/.exec(section)![1];
      for (const paragraph of section.split(/\n\s*\n/)) {
        const names = new Set([own, ...[...paragraph.matchAll(/disagg (\w+)/g)].map(m => m[1]).filter(n => NAMES.includes(n))]);
        const flags = new Set(COMMANDS.filter(c => names.has(c.name)).flatMap(c => Object.keys(c.options)));
        for (const m of paragraph.matchAll(/`(--[a-z][a-z0-9-]*)/g)) {
          const flag = m[1].slice(2);
          // (an old name, where the paragraph says it still works)
          const alias = flag in RENAMED_FLAGS && /still work/.test(paragraph);
          if (!flags.has(flag) && !alias) strays.push(`disagg ${own}: --${flag}`);
        }
      }
    }
    expect(strays).toEqual([]);
  });

  test.each(COMMANDS.map(c => [c.name]))('disagg %s --help documents its exit codes, 0 and 2 among them', name => {
    const help = COMMANDS.find(c => c.name === name)!.help;
    const codes = /Exit codes: ([\s\S]*)$/.exec(help)?.[1] ?? '';
    expect(codes).toMatch(/\b0 /);
    expect(codes).toMatch(/\b2 usage error/);
  });

  // The quick ones run as written (help, plan without --simulate, preflight without the aws CLI).
  // (a bare `disagg preflight` names the command; it needs --region to run)
  const quick = FOUND.filter(c => c.args.includes('--help') || (c.name === 'plan' && !c.args.includes('--simulate'))
    || (c.name === 'preflight' && c.args.length > 0));
  test.each(quick.map(c => [`${c.doc}:${c.line} disagg ${c.name} ${c.args.join(' ')}`, c] as const))('%s runs with its documented exit code', async (_where, c) => {
    const env = process.env.PATH;
    // preflight without the aws CLI: 4 (checks not run, the calls printed), as on a fresh machine
    if (c.name === 'preflight') process.env.PATH = tmpdir('no-aws');
    try {
      const r = await disagg(c.name, ...runnable(c));
      expect({ code: r.code, err: r.err }).toEqual({ code: c.name === 'preflight' ? 4 : 0, err: c.name === 'preflight' ? expect.any(String) : '' });
    } finally {
      process.env.PATH = env;
    }
  });
});
