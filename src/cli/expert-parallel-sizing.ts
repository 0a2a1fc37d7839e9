/**
 * Wide expert-parallel sizing of an MoE model for `disagg plan` (closed form): every expert-parallel
 * size that fills whole nodes and gives each rank whole experts, each as one replica of
 * `EP` data-parallel attention ranks (TP 1, vLLM `--data-parallel-size EP --enable-expert-parallel`),
 * estimated with the roofline (src/sizing/roofline.ts, the same formula as the engine's cost model,
 * including the all-to-all over EFA and the expert load imbalance); then the decode and prefill sizes
 * with the most tokens per accelerator, and the prefill : decode accelerator ratio that balances them
 * for the given prompt and output lengths.
 *
 * Internal to the CLI.
 */
import { ParallelismRules, ServingPlan, ServingPlanProps } from '../sizing';

/** What to size for. */
export interface ExpertParallelSizingInputs {
  /** Largest group to consider, accelerators. */
  readonly maxAccelerators: number;
  /** Prompt tokens per request. */
  readonly inputTokens: number;
  /** Output tokens per request. */
  readonly outputTokens: number;
  /** Sequences one data-parallel rank decodes at most (vLLM --max-num-seqs, per rank). */
  readonly maxNumSeqsPerRank: number;
  /** Token budget of one prefill step of one rank (vLLM --max-num-batched-tokens). */
  readonly maxNumBatchedTokens: number;
  /** Time per output token the decode batch must meet, seconds. @default - none: the largest batch that fits */
  readonly tpotSeconds?: number;
}

/** One expert-parallel size. */
export interface ExpertParallelOption {
  readonly expertParallel: number;
  readonly nodes: number;
  /** Physical experts per rank (routed plus redundant, over EP). */
  readonly expertsPerRank: number;
  readonly fits: boolean;
  readonly problem?: string;
  /** Sequences of input + output tokens one rank's KV cache holds. */
  readonly kvSequencesPerRank: number;
  /** Decode batch per rank: the KV, --max-num-seqs and the TPOT limit allow. */
  readonly decodeBatchPerRank: number;
  readonly tpotSeconds: number;
  readonly decodeTokensPerSecondPerAccelerator: number;
  /** Share of the decode step spent in the expert-parallel all-to-all. */
  readonly decodeAllToAllShare: number;
  readonly prefillTokensPerSecondPerAccelerator: number;
  readonly prefillAllToAllShare: number;
}

/** The options, the chosen sizes and the ratio. */
export interface ExpertParallelSizing {
  readonly inputs: ExpertParallelSizingInputs;
  readonly options: ExpertParallelOption[];
  /** The size with the most output tokens per accelerator (undefined when none fits). */
  readonly decode?: ExpertParallelOption;
  /** The size with the most prompt tokens per accelerator. */
  readonly prefill?: ExpertParallelOption;
  /** Prefill accelerators per decode accelerator that keep both busy: (ISL / prefill rate) / (OSL / decode rate). */
  readonly prefillPerDecodeAccelerator?: number;
  /** Prefill groups (of prefill.expertParallel) for one decode group. */
  readonly prefillGroupsPerDecodeGroup?: number;
}

/** Sizes wide expert parallelism for `base` (its parallel settings are replaced). */
export function sizeExpertParallel(base: ServingPlanProps, inputs: ExpertParallelSizingInputs): ExpertParallelSizing {
  const model = base.model;
  const sizes = ParallelismRules.wideExpertParallelSizes(model, base.instanceType, inputs.maxAccelerators, base.redundantExperts);
  const sequence = inputs.inputTokens + inputs.outputTokens;
  // Decode sequences attend to the prompt plus, on average, half the output.
  const decodeContext = inputs.inputTokens + Math.ceil(inputs.outputTokens / 2);
  const options = sizes.map((ep): ExpertParallelOption => {
    const plan = ServingPlan.create({
      ...base,
      tensorParallel: 1,
      pipelineParallel: 1,
      dataParallel: ep,
      expertParallel: true,
      batchSizes: [ep],
      decodeContextTokens: decodeContext,
    });
    const nodes = ep / base.instanceType.acceleratorCount;
    const expertsPerRank = (model.expertsTotal + (base.redundantExperts ?? 0)) / ep;
    const kvSequencesPerRank = plan.fits ? Math.floor(plan.kvTokens / ep / sequence) : 0;
    let batch = Math.min(kvSequencesPerRank, inputs.maxNumSeqsPerRank);
    const step = (b: number) => plan.roofline.decodeStep(b * ep, decodeContext);
    if (inputs.tpotSeconds !== undefined) {
      // The step time grows with the batch: the largest batch within the TPOT, by bisection.
      let lo = 0;
      let hi = batch;
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (step(mid).stepSeconds <= inputs.tpotSeconds) lo = mid; else hi = mid - 1;
      }
      batch = lo;
    }
    const fits = plan.fits && batch >= 1;
    const problem = !plan.fits ? plan.reasons[0]
      : batch < 1 ? (kvSequencesPerRank < 1 ? `no sequence of ${sequence} tokens fits a rank's KV cache`
        : `even one sequence per rank misses the TPOT of ${inputs.tpotSeconds! * 1000} ms`) : undefined;
    const decode = fits ? step(batch) : undefined;
    const promptsPerRank = Math.max(1, Math.floor(inputs.maxNumBatchedTokens / inputs.inputTokens));
    const prefill = plan.fits ? plan.roofline.prefillBatch(inputs.inputTokens, promptsPerRank * ep) : undefined;
    return {
      expertParallel: ep,
      nodes,
      expertsPerRank,
      fits,
      ...(problem !== undefined ? { problem } : {}),
      kvSequencesPerRank,
      decodeBatchPerRank: fits ? batch : 0,
      tpotSeconds: decode?.stepSeconds ?? 0,
      decodeTokensPerSecondPerAccelerator: decode ? decode.tokensPerSecond / ep : 0,
      decodeAllToAllShare: decode ? decode.allToAllSeconds / decode.stepSeconds : 0,
      prefillTokensPerSecondPerAccelerator: prefill ? prefill.tokensPerSecond / ep : 0,
      prefillAllToAllShare: prefill ? prefill.allToAllSeconds / prefill.seconds : 0,
    };
  });
  const fitting = options.filter(o => o.fits);
  const best = (key: (o: ExpertParallelOption) => number) =>
    fitting.reduce<ExpertParallelOption | undefined>((a, o) => (a === undefined || key(o) > key(a) ? o : a), undefined);
  const decode = best(o => o.decodeTokensPerSecondPerAccelerator);
  const prefill = best(o => o.prefillTokensPerSecondPerAccelerator);
  if (!decode || !prefill) {
    return { inputs, options };
  }
  const prefillPerDecodeAccelerator = (inputs.inputTokens / prefill.prefillTokensPerSecondPerAccelerator)
    / (inputs.outputTokens / decode.decodeTokensPerSecondPerAccelerator);
  const prefillGroupsPerDecodeGroup = Math.max(1,
    Math.ceil((prefillPerDecodeAccelerator * decode.expertParallel) / prefill.expertParallel - 1e-9));
  return { inputs, options, decode, prefill, prefillPerDecodeAccelerator, prefillGroupsPerDecodeGroup };
}
