/**
 * The CLI's words for what the constructs and src/sizing call props.
 *
 * The rules that refuse a deployment live once, below the constructs, and their messages name props
 * ('prefill.tensorParallel' (3), "use tensorParallel 8 with pipelineParallel 2", NodeCapacity.capacityBlock(...)),
 * which is right for a CDK user and wrong on a command line. Each command states which flag sets
 * which prop; `speak` rewrites a message at the CLI's edge into those flags, so the fix it suggests is
 * one the user can type. A prop the command has no flag for is left as it is, and
 * test/cli/vocabulary.test.ts fails on it for every error the CLI can raise.
 */

/** Pool-level props a command may set per pool ('prefill.tensorParallel') and for every pool ('tensorParallel'). */
const POOL_PROPS = ['tensorParallel', 'pipelineParallel', 'replicas', 'expertParallel', 'dataParallel', 'gpuMemoryUtilization', 'redundantExperts'] as const;

/** Deployment-level props, named alone. */
const DEPLOYMENT_PROPS = ['maxContext', 'weightPrecision', 'kvCachePrecision', 'kvPrecision', 'maxNumSeqs', 'maxNumBatchedTokens', 'kvBlockSize',
  'capacity', 'slo.ttftSeconds', 'slo.tpotSeconds', 'instanceType', 'model', 'disaggregationThresholdTokens'] as const;

const CAMEL_PROPS = [...POOL_PROPS, ...DEPLOYMENT_PROPS].filter(p => /^[a-z]+[A-Z]\w*$/.test(p));
// Not in quotes: a quoted prop the command has no flag for stays quoted, and tests find it.
const BARE_PROP = new RegExp(`(?<!')\\b(${CAMEL_PROPS.join('|')})\\b(?!')`, 'g');

type Prop = typeof POOL_PROPS[number] | typeof DEPLOYMENT_PROPS[number];

/** Which flag sets which prop, for one command. `prefill.`/`decode.` keys name one pool's flag. */
export type FlagTable = Partial<Record<Prop | `prefill.${typeof POOL_PROPS[number]}` | `decode.${typeof POOL_PROPS[number]}`, string>>;

/** A command's vocabulary: its flags for the props the shared rules name. */
export class CliVocabulary {
  /** `disagg plan`: one layout, every parallelism flag. */
  public static readonly PLAN = new CliVocabulary({
    tensorParallel: '--tp',
    pipelineParallel: '--pp',
    dataParallel: '--dp',
    expertParallel: '--expert-parallel',
    redundantExperts: '--redundant-experts',
    gpuMemoryUtilization: '--gpu-memory-utilization',
    maxContext: '--max-context',
    weightPrecision: '--weight-precision',
    kvCachePrecision: '--kv-cache-precision',
    kvPrecision: '--kv-cache-precision',
    maxNumSeqs: '--max-num-seqs',
    maxNumBatchedTokens: '--max-num-batched-tokens',
    kvBlockSize: '--block-size',
    instanceType: '--instance',
    model: '--model',
  });

  /** `disagg simulate`: every pool's sizes and each pool's own. */
  public static readonly SIMULATE = new CliVocabulary({
    ...CliVocabulary.PLAN.flags,
    'expertParallel': '--ep',
    'dataParallel': undefined,
    'redundantExperts': undefined,
    'replicas': '--replicas',
    'prefill.tensorParallel': '--prefill-tp',
    'decode.tensorParallel': '--decode-tp',
    'prefill.pipelineParallel': '--prefill-pp',
    'decode.pipelineParallel': '--decode-pp',
    'prefill.expertParallel': '--prefill-ep',
    'decode.expertParallel': '--decode-ep',
    'prefill.replicas': '--prefill-replicas',
    'decode.replicas': '--decode-replicas',
    'prefill.gpuMemoryUtilization': '--gpu-memory-utilization',
    'decode.gpuMemoryUtilization': '--gpu-memory-utilization',
    'slo.ttftSeconds': '--ttft',
    'slo.tpotSeconds': '--tpot',
    'disaggregationThresholdTokens': '--threshold',
  });

  /** `disagg synth`: the DisaggregatedInference it builds. */
  public static readonly SYNTH = new CliVocabulary({
    'tensorParallel': '--tp',
    'pipelineParallel': '--pp',
    'gpuMemoryUtilization': '--gpu-memory-utilization',
    'prefill.tensorParallel': '--prefill-tp',
    'decode.tensorParallel': '--decode-tp',
    'prefill.pipelineParallel': '--prefill-pp',
    'decode.pipelineParallel': '--decode-pp',
    'prefill.replicas': '--prefill-replicas',
    'decode.replicas': '--decode-replicas',
    'prefill.gpuMemoryUtilization': '--gpu-memory-utilization',
    'decode.gpuMemoryUtilization': '--gpu-memory-utilization',
    'maxContext': '--max-context',
    'weightPrecision': '--weight-precision',
    'kvCachePrecision': '--kv-cache-precision',
    'kvPrecision': '--kv-cache-precision',
    'instanceType': '--instance',
    'model': '--model',
    'capacity': '--capacity-block',
  });

  /** `disagg local`: the deployment it runs on loopback. */
  public static readonly LOCAL = new CliVocabulary({
    'replicas': '--replicas',
    'prefill.replicas': '--prefill-replicas',
    'decode.replicas': '--decode-replicas',
    'slo.ttftSeconds': '--ttft',
    'slo.tpotSeconds': '--tpot',
    'maxNumSeqs': '--max-num-seqs',
  });

  private constructor(public readonly flags: FlagTable) {}

  /** The flag of `prop` ('tensorParallel', 'prefill.tensorParallel'), falling back from a pool's to every pool's. */
  public flagOf(prop: string): string | undefined {
    const table = this.flags as Record<string, string | undefined>;
    if (prop in table) return table[prop];
    const bare = prop.replace(/^(prefill|decode)\./, '');
    return table[bare];
  }

  /**
   * `message` in this command's flags: the construct path prefix dropped, each quoted prop with its
   * value as the flag with that value, the fixes after "use" as flags and values, and API names
   * (NodeCapacity..., AcceleratedInstanceType.of) as the flags that do the same.
   */
  public speak(message: string): string {
    const text = message
      // "DisaggregatedInference 'disagg/Inference': " names a construct path the user never wrote.
      .replace(/\b[A-Z]\w+ '[^'\s]*\/[^'\s]*': /g, '')
      // The catalog's escape hatches are the library's, not the command line's.
      .replace(/,? or use (AcceleratedInstanceType|ModelArchitecture)\.\w+\(\{\.\.\.\}\)/g, '')
      .replace(/(?:buy a Capacity Block for ML and )?use NodeCapacity\.capacityBlock\('cr-\.\.\.'\)/g, 'buy a Capacity Block for ML and pass its id: --capacity-block cr-...')
      .replace(/NodeCapacity\.capacityReservation\('cr-\.\.\.'\)/g, '--capacity-reservation cr-...')
      .replace(/'capacity' \(on-demand\)/g, 'On-Demand capacity (no --capacity-block or --capacity-reservation)')
      // A prequantized checkpoint is a ModelSource choice no command line names.
      .replace(/Point 'modelSource' at (?:one|an? \w+ checkpoint) and set 'prequantizedCheckpoint: true', or use /g,
        'The constructs serve such a checkpoint (a command line cannot name one); here, use ')
      .replace(/use Precision\.FP8 with a static-FP8 checkpoint, or use /g, 'use ')
      .replace(/\bPrecision\.([A-Z0-9]+)\b/g, (all, p: string) => {
        const f = this.flagOf('weightPrecision');
        return f ? `${f} ${p.toLowerCase()}` : all;
      });
    // One problem per line; a line about one pool ('prefill.tensorParallel' (3) ...) speaks of that
    // pool's flags throughout ("at tensorParallel 3", "use tensorParallel 8" -> --prefill-tp).
    return text.split('\n').map(line => this.speakLine(line)).join('\n');
  }

  private speakLine(line: string): string {
    const pool = /^(?:- )?'(prefill|decode)\./.exec(line)?.[1];
    const flag = (prop: string, explicitPool?: string) => this.flagOf(`${explicitPool ?? (pool ? `${pool}.` : '')}${prop}`);
    // 'prefill.tensorParallel' (3) -> --prefill-tp 3; 'maxContext' (200000) -> --max-context 200000.
    let text = line.replace(/'((?:prefill|decode)\.)?([a-z][A-Za-z]*(?:\.[a-z][A-Za-z]*)?)'(?: \(([^()]*)\))?/g,
      (all, p: string | undefined, prop: string, value: string | undefined) => {
        const f = flag(prop, p);
        if (f === undefined) return all;
        return value === undefined || f === '--expert-parallel' ? f : `${f} ${value}`;
      });
    // Fixes and descriptions: "tensorParallel >= 8", "pipelineParallel 2", "maxContext <= 4096".
    text = text.replace(/\b([a-z]+[A-Z][A-Za-z]*)( (>=|<=) | )(\d[\d.]*)\b/g, (all, prop: string, _gap: string, op: string | undefined, value: string) => {
      const f = flag(prop);
      if (f === undefined) return all;
      return op === '>=' ? `${f} ${value} (or more)` : op === '<=' ? `${f} ${value} (or less)` : `${f} ${value}`;
    });
    // Within "use ...": "fp4 weights" -> --weight-precision fp4, "fp8 KV cache" -> --kv-cache-precision fp8,
    // "a B200 (p6-b200.48xlarge)" -> --instance p6-b200.48xlarge (B200).
    const weights = flag('weightPrecision');
    const kv = flag('kvCachePrecision');
    const instance = flag('instanceType');
    text = text.replace(/\buse ([^;\n]*)/g, (_all, fixes: string) => 'use ' + fixes
      .replace(/\b(bf16|fp16|fp8|fp4|int8|int4|mxfp4) weights\b/g, (all, p: string) => (weights ? `${weights} ${p}` : all))
      .replace(/\b(bf16|fp16|fp8) KV cache\b/g, (all, p: string) => (kv ? `${kv} ${p}` : all))
      .replace(/\ban? ([A-Z][\w-]*) \(([a-z0-9][\w.-]*(?: or [a-z0-9][\w.-]*)*)\)/g, (all, accelerator: string, types: string) =>
        (instance ? `${instance} ${types} (${accelerator})` : all)));
    // A prop left bare ("the group is tensorParallel x dataParallel ranks"): its flag, else plain words.
    return text.replace(BARE_PROP, (word: string) => flag(word) ?? word.replace(/[A-Z]/g, c => ` ${c.toLowerCase()}`));
  }
}

/**
 * Construct and sizing vocabulary a CLI error must not show: prop names, pool-qualified props and the
 * library's API. Tests search every CLI error for it.
 */
export const CONSTRUCT_WORDS = new RegExp(
  [...CAMEL_PROPS, 'slo\\.\\w+', 'modelSource', 'prequantizedCheckpoint', 'Precision\\.', 'NodeCapacity', 'AcceleratedInstanceType', 'ModelArchitecture',
    "'(prefill|decode)\\.", "DisaggregatedInference '"].map(w => (/^\w+$/.test(w) ? `\\b${w}\\b` : w)).join('|'));
