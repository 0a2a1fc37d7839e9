import { disagg, tmpdir } from './util';
import { loadCommands } from '../../src/cli/registry';
import { CliVocabulary, CONSTRUCT_WORDS } from '../../src/cli/vocabulary';

/** Every `--flag` a command's help documents. */
function helpFlags(command: string): Set<string> {
  const help = loadCommands().find(c => c.name === command)!.help;
  return new Set(help.match(/--[a-z][a-z0-9-]*/g) ?? []);
}

/** The `--flags` a text names, without vLLM's own (`vLLM --max-num-seqs`) and engine-binary ones. */
function flagsNamed(text: string): string[] {
  return [...text.matchAll(/(?<![\w-])--[a-z][a-z0-9-]*/g)].map(m => m[0]);
}

/**
 * Bad input for every command, as a new user types it: the exit code the help documents, an error
 * that names no construct prop or API, and only flags the command has.
 */
const CASES: Array<[string, string[], number]> = [
  // synth: the construct's own validation, spoken in synth's flags.
  ['synth', ['--instance', 'p6e-gb200.36xlarge'], 2],
  ['synth', ['--model', 'llama-3.1-405b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16'], 2],
  ['synth', ['--tp', '3'], 2],
  ['synth', ['--tp', '16'], 2],
  ['synth', ['--decode-tp', '3'], 2],
  ['synth', ['--max-context', '200000'], 2],
  ['synth', ['--model', 'llama-3.3-70b', '--instance', 'p4d.24xlarge', '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16', '--max-context', '131072', '--tp', '2'], 2],
  ['synth', ['--model', 'llama-3.3-70b', '--instance', 'trn2.48xlarge', '--tp', '3'], 2],
  ['synth', ['--model', 'deepseek-v3', '--instance', 'p5.48xlarge'], 2],
  ['synth', ['--instance', 'trn2.48xlarge', '--weight-precision', 'fp8'], 2],
  ['synth', ['--instance', 'trn2.48xlarge', '--weight-precision', 'int4'], 2],
  ['synth', ['--prefill-replicas', '0'], 2],
  ['synth', ['--tp', '-1'], 2],
  ['synth', ['--pp', '0'], 2],
  ['synth', ['--gpu-memory-utilization', '1.5'], 2],
  ['synth', ['--instance', 'g5.xlarge'], 2],
  ['synth', ['--model', 'no-such-model'], 2],
  // simulate: every pool's problems, each in its pool's flags.
  ['simulate', ['--model', 'deepseek-v3', '--decode-ep', '12'], 2],
  ['simulate', ['--model', 'llama-3.1-405b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16'], 2],
  ['simulate', ['--prefill-tp', '3'], 2],
  ['simulate', ['--aggregated', '--tp', '16'], 2],
  ['simulate', ['--max-context', '200000'], 2],
  ['simulate', ['--model', 'deepseek-v3', '--aggregated', '--ep', '7'], 2],
  ['simulate', ['--model', 'deepseek-v3', '--aggregated', '--ep', '16', '--pp', '2'], 2],
  ['simulate', ['--model', 'llama-3.1-8b', '--aggregated', '--ep', '8'], 2],
  ['simulate', ['--model', 'llama-3.3-70b', '--instance', 'p4d.24xlarge', '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16', '--max-context', '131072', '--aggregated', '--tp', '2'], 2],
  ['simulate', ['--rate', '-1'], 2],
  ['simulate', ['--max-num-seqs', '0'], 2],
  ['simulate', ['--ep', '8'], 2],
  // plan: "does not fit" is an answer (exit 1) printed on stdout, in plan's flags.
  ['plan', ['--model', 'llama-3.1-405b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--tp', '4'], 1],
  ['plan', ['--model', 'deepseek-v3', '--tp', '4'], 1],
  ['plan', ['--model', 'deepseek-v3', '--expert-parallel', '--tp', '1', '--dp', '12'], 1],
  ['plan', ['--model', 'llama-3.3-70b', '--instance', 'p4d.24xlarge', '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16', '--max-context', '131072', '--tp', '2'], 1],
  ['plan', ['--max-context', '200000'], 1],
  ['plan', ['--tp', '-2'], 2],
  ['plan', ['--kv-cache-precision', 'int4'], 2],
  // local: the flags are checked before anything starts.
  ['local', ['--replicas', '0'], 2],
  ['local', ['--prefill-replicas', '2'], 2],
  ['local', ['--autoscale', '--ttft', '-1'], 2],
  ['local', ['--tp', '2'], 2],
];

describe('errors speak the vocabulary of the interface that raised them', () => {
  const out = tmpdir('vocabulary');

  test.each(CASES)('disagg %s %j exits %i and names only its own flags', async (command, args, expected) => {
    // WHEN a new user passes bad input
    const r = await disagg(command, ...args, ...(command === 'synth' || command === 'simulate' ? ['--out', out] : []));

    // THEN the exit code is the documented one
    expect(r.code).toBe(expected);
    // AND what explains it (stderr; plan's verdict lines on stdout) names no construct prop or API
    const said = r.err + '\n' + r.out.split('\n').filter(l => /^\s+- |^DOES NOT FIT|no: /.test(l)).join('\n');
    expect(said.trim()).not.toBe('');
    expect(said).not.toMatch(CONSTRUCT_WORDS);
    // AND every flag it names is one of this command's (so the fix can be typed)
    const own = helpFlags(command);
    // (the flag the user typed may be unknown to the command: "Unknown option '--tp'"; a quoted '--flag' is vLLM's)
    const foreign = flagsNamed(said).filter(f => !own.has(f) && !args.includes(f) && !said.includes(`vLLM ${f}`) && !said.includes(`'${f}'`));
    expect(foreign).toEqual([]);
  });

  test('on Trainium a weight-precision error offers what vLLM Neuron runs, not load-time FP8', async () => {
    // GIVEN INT4 weights on trn2, which quantizes nothing at load time
    const r = await disagg('synth', '--instance', 'trn2.48xlarge', '--weight-precision', 'int4', '--out', out);
    // THEN the fix is the checkpoint as stored, not the FP8 a GPU would quantize to
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/use --weight-precision bf16/);
    expect(r.err).not.toMatch(/use --weight-precision fp8/);
  });
});

describe('CliVocabulary', () => {
  test('a pool\'s problem speaks of that pool\'s flags throughout, the others keep theirs', () => {
    const message = "DisaggregatedInference 'disagg/Inference': the decode pool cannot run m on t:\n"
      + "- 'decode.tensorParallel' (4) leaves too little memory at tensorParallel 4 and gpuMemoryUtilization 0.9; use tensorParallel >= 8, "
      + 'tensorParallel 8 with pipelineParallel 2 (2 nodes per replica), fp4 weights, fp8 KV cache or a B200 (p6-b200.48xlarge)\n'
      + "- 'maxContext' (9000) exceeds the 8,192-token context of m; use maxContext <= 8192";
    expect(CliVocabulary.SYNTH.speak(message)).toBe('the decode pool cannot run m on t:\n'
      + '- --decode-tp 4 leaves too little memory at --decode-tp 4 and --gpu-memory-utilization 0.9; use --decode-tp 8 (or more), '
      + '--decode-tp 8 with --decode-pp 2 (2 nodes per replica), --weight-precision fp4, --kv-cache-precision fp8 or --instance p6-b200.48xlarge (B200)\n'
      + '- --max-context 9000 exceeds the 8,192-token context of m; use --max-context 8192 (or less)');
  });

  test('a prop the command has no flag for stays a prop, so the table test above catches it', () => {
    expect(CliVocabulary.LOCAL.speak("'tensorParallel' (3) must divide 64")).toBe("'tensorParallel' (3) must divide 64");
    expect(CliVocabulary.LOCAL.speak("'tensorParallel' (3) must divide 64")).toMatch(CONSTRUCT_WORDS);
  });

  test('capacity and catalog APIs become the flags that do the same', () => {
    expect(CliVocabulary.SYNTH.speak("'capacity' (on-demand) is not available for p6e-gb200.36xlarge, which can be bought as: capacity-block; "
      + "buy a Capacity Block for ML and use NodeCapacity.capacityBlock('cr-...')"))
      .toBe('On-Demand capacity (no --capacity-block or --capacity-reservation) is not available for p6e-gb200.36xlarge, which can be bought as: '
        + 'capacity-block; buy a Capacity Block for ML and pass its id: --capacity-block cr-...');
    expect(CliVocabulary.SYNTH.speak("Unknown instance type 'x'; known: a, b, or use AcceleratedInstanceType.of({...})")).toBe("Unknown instance type 'x'; known: a, b");
  });
});

describe('renamed flags', () => {
  test.each([
    ['plan', ['--context', '4096'], '--max-context'],
    ['plan', ['--kv', 'bf16'], '--kv-cache-precision'],
    ['plan', ['--weights', 'bf16'], '--weight-precision'],
  ])('disagg %s %j still works and says the new name', async (command, args, renamed) => {
    const old = await disagg(command, ...args, '--json');
    const now = await disagg(command, renamed, args[1], '--json');
    expect(old.code).toBe(0);
    expect(old.err).toContain(`warning: ${args[0]} is now ${renamed}`);
    expect(now.err).toBe('');
    expect(JSON.parse(old.out)).toEqual(JSON.parse(now.out));
  });

  test('local\'s replica and SLO flags read as the other commands\' (old names warn)', async () => {
    const r = await disagg('local', '--workers', '0');
    expect(r.err).toContain('warning: --workers is now --replicas');
    expect(r.err).toMatch(/--replicas/);
    const slo = await disagg('local', '--autoscale', '--ttft-slo', '-1');
    expect(slo.err).toContain('warning: --ttft-slo is now --ttft');
    expect(slo.err).toMatch(/--ttft expects a positive number, got '-1'/);
  });

  test('a negative value reaches the flag\'s own check instead of node\'s "argument is ambiguous"', async () => {
    for (const [command, flag] of [['plan', '--tp'], ['simulate', '--rate'], ['synth', '--decode-replicas'], ['local', '--requests']]) {
      const r = await disagg(command, flag, '-3');
      expect(r.code).toBe(2);
      expect(r.err).not.toMatch(/ambiguous/);
      expect(r.err).toContain(flag);
    }
  });
});
