import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../catalog';
import { Roofline, ServingPlan, ServingPlanProps } from '../../sizing';
import { resolveKvBlockSize } from '../../sizing/private/kv-block-size';
import { formatGbAndGib, formatGib, formatInt, formatSeconds, GIB } from '../../sizing/private/units';
import { CliIo, Command, ExitCode, UsageError, parseOptions } from '../command';
import { DEFAULT_DEPLOYMENT, defaultTensorParallelChoice, MODEL_FLAG_OPTIONS, defaultContext, defaultKvPrecision, effectiveWeightsFlag } from '../defaults';
import { ENGINE_FLAG_HELP, ENGINE_FLAG_OPTIONS, SCHEDULER_FLAG_HELP, SCHEDULER_FLAG_OPTIONS, schedulerFlags } from '../engine-flags';
import { ExpertParallelSizing, sizeExpertParallel } from '../expert-parallel-sizing';
import { PLAN_SIMULATE_HELP, PLAN_SIMULATE_OPTIONS, runPlanSearch } from '../plan-simulate';
import { renderTable } from '../table';
import { CliVocabulary } from '../vocabulary';

const HELP = `Usage: disagg plan [options]

Says whether a model fits an instance type and how to split it: valid tensor-parallel sizes per pod with
memory per accelerator, KV tokens and concurrent sequences per replica, EFA interfaces per pod, and
roofline estimates of time to first token (TTFT) and time per output token (TPOT).
With no options it plans the default deployment: ${DEFAULT_DEPLOYMENT.model} with ${DEFAULT_DEPLOYMENT.weights} weights and
${DEFAULT_DEPLOYMENT.kv} KV cache on ${DEFAULT_DEPLOYMENT.instance} at ${DEFAULT_DEPLOYMENT.context} tokens of context.

Options:
  --model NAME                 catalog model name or Hugging Face id (default ${DEFAULT_DEPLOYMENT.model})
  --instance NAME              EC2 instance type (default ${DEFAULT_DEPLOYMENT.instance})
  --weight-precision P         bf16, fp16, fp8, int8, fp4 (mxfp4), int4 (awq), or native for the
                               checkpoint's own (default ${DEFAULT_DEPLOYMENT.weights}; was --weights)
  --kv-cache-precision P       KV cache precision: bf16 (auto), fp16 or fp8 (default ${DEFAULT_DEPLOYMENT.kv} with the
                               default weights, else bf16 = vLLM's auto; was --kv)
  --max-context TOKENS         longest sequence, prompt plus output (default ${DEFAULT_DEPLOYMENT.context}, or the model's
                               own if shorter; was --context)
  --tp N                       tensor-parallel size (default ${DEFAULT_DEPLOYMENT.tensorParallel}, as synth, simulate and local
                               deploy, where it is valid and fits; else the smallest valid size that fits)
  --pp N                       pipeline-parallel size (default 1)
  --dp N                       data-parallel attention ranks per replica (default 1)
  --expert-parallel            shard MoE experts over tp x dp ranks
  --redundant-experts N        extra expert replicas for load balancing (default 0)
  --price-per-hour PRICE       price of one instance per hour; adds cost per million output tokens
  --batch-sizes LIST           decode batch sizes to estimate (default 1,8,32,128)
  --prompt-lengths LIST        prompt lengths for TTFT (default 1024,4096,<context>)
  --decode-context TOKENS      context per sequence in the TPOT estimates (default: --max-context)
  --json                       print machine-readable JSON only
  -h, --help                   show this help

Wide expert parallelism (MoE models): the plan also sizes one replica per expert-parallel group of
whole nodes (TP 1, one data-parallel attention rank per accelerator, each rank whole experts), charging
the dispatch and combine all-to-all over EFA and NVLink and the expert load imbalance, and picks the
decode and prefill EP sizes and the prefill : decode ratio. Without --simulate it reads four flags
listed below with defaults of its own: --input-tokens and --output-tokens as one number each (default
1024 each, the prompt at most half of --max-context), --tpot (default: none, the largest batch the KV cache
and --max-num-seqs allow) and --max-accelerators (the largest expert-parallel group, default 64).

${SCHEDULER_FLAG_HELP}
  (the first four size the plan too; --cpu-offload-gib and --async-scheduling need --simulate)

${PLAN_SIMULATE_HELP}
${ENGINE_FLAG_HELP}

Exit codes: 0 fits, 1 does not fit (the reasons are printed; with --simulate: no candidate meets the
SLO), 2 usage error (unknown model or instance type, bad value), 3 engine addon missing.`;

/** The flags of `disagg plan`, as its parser reads them (tests parse the README's commands with them). */
const OPTIONS = {
  ...MODEL_FLAG_OPTIONS,
  'tp': { type: 'string' },
  'pp': { type: 'string' },
  'dp': { type: 'string' },
  'expert-parallel': { type: 'boolean' },
  'redundant-experts': { type: 'string' },
  ...SCHEDULER_FLAG_OPTIONS,
  'price-per-hour': { type: 'string' },
  'batch-sizes': { type: 'string' },
  'prompt-lengths': { type: 'string' },
  'decode-context': { type: 'string' },
  'json': { type: 'boolean' },
  'help': { type: 'boolean', short: 'h' },
  ...PLAN_SIMULATE_OPTIONS,
  ...ENGINE_FLAG_OPTIONS,
} as const;

/** `disagg plan`: the sizing plan of one deployment. */
export const command: Command = {
  name: 'plan',
  options: OPTIONS,
  summary: 'Check that a model fits an instance type; tensor-parallel options, KV capacity, latency estimates',
  help: HELP,
  vocabulary: CliVocabulary.PLAN,
  run: runPlan,
};

async function runPlan(argv: string[], io: CliIo): Promise<number> {
  const values = parseOptions(argv, OPTIONS, io);
  if (values.help) {
    io.out(HELP);
    return ExitCode.OK;
  }

  const model = lookupModel(values.model ?? DEFAULT_DEPLOYMENT.model);
  const instanceType = lookupInstance(values.instance ?? DEFAULT_DEPLOYMENT.instance);
  const weightsFlag = effectiveWeightsFlag(values['weight-precision'], instanceType, model);
  const weightsName = weightsFlag ?? DEFAULT_DEPLOYMENT.weights;
  const scheduler = schedulerFlags(values);
  if (scheduler.kvBlockSize !== undefined) {
    // The constructs' rule: an MLA model's block size is what its attention backend runs (64 on Hopper
    // and Blackwell); a --block-size vLLM would replace is refused with the fix.
    try {
      resolveKvBlockSize('', model, scheduler.kvBlockSize, [instanceType], '--block-size');
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  let props: ServingPlanProps = {
    model,
    instanceType,
    weightPrecision: weightsName.toLowerCase() === 'native' ? undefined : precision('--weight-precision', weightsName),
    kvCachePrecision: kvCachePrecision(values['kv-cache-precision'] ?? defaultKvPrecision(weightsFlag)),
    maxContext: integer('--max-context', values['max-context']) ?? defaultContext(model),
    tensorParallel: integer('--tp', values.tp),
    pipelineParallel: integer('--pp', values.pp),
    dataParallel: integer('--dp', values.dp),
    expertParallel: values['expert-parallel'],
    redundantExperts: integer('--redundant-experts', values['redundant-experts'], true),
    gpuMemoryUtilization: scheduler.gpuMemoryUtilization,
    maxNumSeqs: scheduler.maxNumSeqs,
    maxNumBatchedTokens: scheduler.maxNumBatchedTokens,
    kvBlockSize: scheduler.kvBlockSize,
    pricePerHour: decimal('--price-per-hour', values['price-per-hour']),
    batchSizes: integerList('--batch-sizes', values['batch-sizes']),
    promptLengths: integerList('--prompt-lengths', values['prompt-lengths']),
    decodeContextTokens: integer('--decode-context', values['decode-context']),
  };

  // Without --tp, the pods the other commands deploy (defaultTensorParallel), and say which size is the
  // smallest that fits; an expert-parallel or data-parallel layout keeps the library's choice.
  let smallestFitting: number | undefined;
  let tpDefaulted = false;
  if (props.tensorParallel === undefined && !values.simulate && props.dataParallel === undefined && props.expertParallel !== true) {
    // Malformed values are reported below, when the plan itself is made.
    const choice = defaultTensorParallelChoice(props);
    smallestFitting = choice.smallestFitting;
    props = { ...props, tensorParallel: choice.tensorParallel };
    tpDefaulted = true;
  }

  if (values.simulate) {
    return runPlanSearch(values, {
      model,
      instanceType,
      weightPrecision: props.weightPrecision,
      kvCachePrecision: props.kvCachePrecision!,
      maxContext: props.maxContext,
      tensorParallel: props.tensorParallel,
      pricePerHour: props.pricePerHour,
      scheduler,
      json: values.json === true,
    }, io);
  }
  // The expert-parallel sizing of an MoE model reads these without --simulate.
  const epFlags = model.isMoe ? ['input-tokens', 'output-tokens', 'tpot', 'max-accelerators'] : [];
  const simulationOnly = [...Object.keys(PLAN_SIMULATE_OPTIONS), ...Object.keys(ENGINE_FLAG_OPTIONS), 'cpu-offload-gib', 'async-scheduling']
    .filter(k => !epFlags.includes(k))
    .filter(k => (values as Record<string, unknown>)[k] !== undefined);
  if (simulationOnly.length > 0) {
    throw new UsageError(`--${simulationOnly[0]} needs --simulate (the simulation-based search)`);
  }

  let plan: ServingPlan;
  try {
    plan = ServingPlan.create(props);
  } catch (e) {
    // Malformed values the library rejects (e.g. a utilization above 1): a usage error.
    throw new UsageError((e as Error).message);
  }
  const ep = model.isMoe ? expertParallelSizing(props, values, scheduler.maxNumSeqs, scheduler.maxNumBatchedTokens) : undefined;
  if (values.json) {
    io.out(JSON.stringify({ ...planToJson(plan, tpDefaulted), ...(ep ? { expertParallelSizing: ep } : {}) }, null, 2));
  } else {
    const lines = renderPlan(plan);
    if (tpDefaulted) {
      const at = lines.findIndex(l => l.startsWith('FITS:') || l.startsWith('DOES NOT FIT:'));
      lines.splice(at + 1 + (plan.fits ? 0 : plan.reasons.length), 0, `  (TP ${plan.parallelism.tensorParallel}: the pods \`disagg synth\`, \`simulate\` and \`local\` deploy without --tp`
        + (smallestFitting !== undefined ? `; the smallest size that fits is TP ${smallestFitting}, in the table below)` : ')'));
    }
    // The layout asked for does not fit, and another one does: say so under the verdict, not only in a table below.
    if (!plan.fits && ep?.decode !== undefined) {
      const at = lines.findIndex(l => l.startsWith('DOES NOT FIT'));
      lines.splice(at + 1 + plan.reasons.length, 0, `  - an expert-parallel layout fits instead: EP ${ep.decode.expertParallel} ` +
        `(${ep.decode.nodes} node${ep.decode.nodes === 1 ? '' : 's'}); see "Wide expert parallelism" below, and plan it with --expert-parallel --tp 1 --dp ${ep.decode.expertParallel}`);
    }
    io.out([...lines, ...(ep ? ['', ...renderExpertParallel(ep, plan)] : [])].join('\n'));
  }
  // The exit code answers for the plan the verdict names, as for dense models: 1 when it does not fit.
  return plan.fits ? ExitCode.OK : ExitCode.NEGATIVE;
}

/** The wide-EP sizing of an MoE model, from the plan's inputs and the EP flags. */
function expertParallelSizing(props: ServingPlanProps, values: Record<string, unknown>,
  maxNumSeqs: number | undefined, maxNumBatchedTokens: number | undefined): ExpertParallelSizing {
  const context = props.maxContext;
  const inputTokens = integer('--input-tokens', values['input-tokens'] as string | undefined) ?? Math.min(1024, Math.floor(context / 2));
  const outputTokens = integer('--output-tokens', values['output-tokens'] as string | undefined) ?? Math.min(1024, context - inputTokens);
  if (inputTokens + outputTokens > context) {
    throw new UsageError(`--input-tokens ${inputTokens} + --output-tokens ${outputTokens} exceed --max-context ${context}; raise --max-context or shorten them`);
  }
  const tpot = decimal('--tpot', values.tpot as string | undefined);
  return sizeExpertParallel(props, {
    maxAccelerators: integer('--max-accelerators', values['max-accelerators'] as string | undefined) ?? 64,
    inputTokens,
    outputTokens,
    // vLLM's OpenAI server default (VLLM_DEFAULT_MAX_NUM_SEQS), per data-parallel rank.
    maxNumSeqsPerRank: maxNumSeqs ?? 256,
    maxNumBatchedTokens: maxNumBatchedTokens ?? 8192,
    ...(tpot !== undefined ? { tpotSeconds: tpot } : {}),
  });
}

/** The wide-EP table, the chosen sizes and the ratio. */
function renderExpertParallel(ep: ExpertParallelSizing, plan: ServingPlan): string[] {
  const lines: string[] = [];
  const i = ep.inputs;
  lines.push(`Wide expert parallelism (TP 1, one attention rank per accelerator; ${formatInt(i.inputTokens)} prompt + ${formatInt(i.outputTokens)} output tokens` +
    `${i.tpotSeconds !== undefined ? `, TPOT <= ${formatSeconds(i.tpotSeconds)}` : ''}; at most ${i.maxNumSeqsPerRank} sequences per rank)`);
  if (ep.options.length === 0) {
    lines.push(`  no expert-parallel size of whole ${plan.instanceType.name} nodes up to ${i.maxAccelerators} accelerators divides the ${plan.model.expertsTotal} experts; raise --max-accelerators`);
    return lines;
  }
  const pctText = (f: number) => `${(f * 100).toFixed(0)}%`;
  const rows = ep.options.map(o => [
    String(o.expertParallel),
    String(o.nodes),
    String(o.expertsPerRank),
    formatInt(o.kvSequencesPerRank),
    o.fits ? formatInt(o.decodeBatchPerRank) : '-',
    o.fits ? formatSeconds(o.tpotSeconds) : '-',
    o.fits ? formatInt(o.decodeTokensPerSecondPerAccelerator) : '-',
    o.fits ? pctText(o.decodeAllToAllShare) : '-',
    o.fits ? formatInt(o.prefillTokensPerSecondPerAccelerator) : '-',
    o.fits ? pctText(o.prefillAllToAllShare) : '-',
    (o.fits ? 'yes' : `no: ${CliVocabulary.PLAN.speak(o.problem ?? '')}`) + (o === ep.decode ? '  <- decode' : '') + (o === ep.prefill ? '  <- prefill' : ''),
  ]);
  lines.push(...renderTable(
    ['EP', 'nodes', 'experts/rank', 'KV seqs/rank', 'batch/rank', 'TPOT', 'output tok/s/acc', 'all-to-all', 'prefill tok/s/acc', 'all-to-all', 'fits'],
    rows, [true, true, true, true, true, true, true, true, true, true, false]));
  if (ep.decode && ep.prefill) {
    const d = ep.decode;
    const p = ep.prefill;
    lines.push(`Decode: EP ${d.expertParallel} (${d.nodes} node${d.nodes === 1 ? '' : 's'}), ${formatInt(d.decodeTokensPerSecondPerAccelerator)} output tok/s per accelerator ` +
      `at ${formatInt(d.decodeBatchPerRank)} sequences per rank, ${pctText(d.decodeAllToAllShare)} of each step in the all-to-all.`);
    lines.push(`Prefill: EP ${p.expertParallel}, ${formatInt(p.prefillTokensPerSecondPerAccelerator)} prompt tok/s per accelerator. ` +
      `P:D = ${ep.prefillGroupsPerDecodeGroup} prefill group${ep.prefillGroupsPerDecodeGroup === 1 ? '' : 's'} of EP ${p.expertParallel} per decode group of EP ${d.expertParallel} ` +
      `(${ep.prefillPerDecodeAccelerator!.toFixed(2)} prefill accelerators per decode accelerator keep both busy).`);
  } else {
    lines.push('No expert-parallel size fits: raise --max-accelerators, shorten --input-tokens/--output-tokens, or loosen --tpot.');
  }
  const r = plan.roofline;
  lines.push(`Assumptions: all-to-all FP8 dispatch and BF16 combine at ${pctText(r.allToAllEfficiency)} of each accelerator's EFA share ` +
    `(${formatInt(plan.instanceType.networkBandwidthGbps / plan.instanceType.acceleratorCount)} Gbit/s) and ${pctText(r.interconnectEfficiency)} of NVLink, ` +
    `not overlapped with compute (vLLM without --enable-dbo); busiest expert rank at ${plan.parallelism.redundantExperts > 0 ? Roofline.DEFAULT_EXPERT_IMBALANCE_EPLB : Roofline.DEFAULT_EXPERT_IMBALANCE} x the mean load ` +
    `(${plan.parallelism.redundantExperts > 0 ? 'with' : 'without'} redundant experts); same formula as the engine's cost model.`);
  return lines;
}

function lookupModel(name: string): ModelArchitecture {
  try {
    return ModelArchitecture.fromName(name);
  } catch {
    throw new UsageError(`unknown model '${name}' (--model); known models: ${ModelArchitecture.all().map(m => m.name).join(', ')}`);
  }
}

function lookupInstance(name: string): AcceleratedInstanceType {
  try {
    return AcceleratedInstanceType.fromName(name);
  } catch {
    throw new UsageError(`unknown instance type '${name}' (--instance); known instance types: ${AcceleratedInstanceType.all().map(t => t.name).join(', ')}`);
  }
}

function precision(flag: string, name: string): Precision {
  try {
    return Precision.of(name);
  } catch (e) {
    throw new UsageError(`${flag}: ${(e as Error).message}`);
  }
}

function kvCachePrecision(name: string): Precision {
  // vLLM's 'auto' keeps the KV cache in the activation dtype: BF16 for every catalog model.
  const p = name.toLowerCase() === 'auto' ? Precision.BF16 : precision('--kv-cache-precision', name);
  if (!p.supportedForKvCache) {
    const usable = Precision.all().filter(x => x.supportedForKvCache).map(x => x.name).join(', ');
    throw new UsageError(`--kv-cache-precision '${name}': vLLM cannot hold a KV cache in ${p.name}; use ${usable}`);
  }
  return p;
}

function integer(flag: string, text: string | undefined, allowZero = false): number | undefined {
  if (text === undefined) {
    return undefined;
  }
  const ok = /^\d+$/.test(text.trim()) && (allowZero || Number(text) > 0);
  if (!ok) {
    throw new UsageError(`${flag} expects a ${allowZero ? 'non-negative' : 'positive'} integer, got '${text}'`);
  }
  return Number(text);
}

function decimal(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) {
    return undefined;
  }
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value <= 0) {
    throw new UsageError(`${flag} expects a positive number, got '${text}'`);
  }
  return value;
}

function integerList(flag: string, text: string | undefined): number[] | undefined {
  if (text === undefined) {
    return undefined;
  }
  const items = text.split(',').map(s => s.trim()).filter(s => s !== '');
  if (items.length === 0) {
    throw new UsageError(`${flag} expects a comma-separated list of positive integers, got '${text}'`);
  }
  return items.map(item => integer(flag, item)!);
}

/** Human-readable plan: header, verdict, memory, TP options, latency tables, notes, assumptions. */
function renderPlan(plan: ServingPlan): string[] {
  const lines: string[] = [];
  const t = plan.instanceType;
  const a = t.accelerator;
  const p = plan.parallelism;
  const ctx = formatInt(plan.maxContext);
  lines.push(`disagg plan: ${plan.model.name} on ${t.name} (${t.acceleratorCount} x ${a.name}, ${a.memoryGib} GiB each)`);
  lines.push(`  weights   ${formatGbAndGib(plan.weights.totalBytes)}, ${plan.weights.description}`);
  lines.push(`  KV cache  ${plan.kvCache.precision.name}, ${formatInt(plan.kvCache.bytesPerToken)} bytes per token (all layers)`);
  lines.push(`  context   ${ctx} tokens; GPU memory utilization ${plan.memory.gpuMemoryUtilization}`);
  lines.push('');

  const how = describeLayout(plan);
  if (plan.fits) {
    lines.push(`FITS: ${how}`);
  } else {
    lines.push(`DOES NOT FIT: ${how}`);
    for (const reason of plan.reasons) {
      lines.push(`  - ${CliVocabulary.PLAN.speak(reason)}`);
    }
  }
  lines.push('');

  const m = plan.memory;
  lines.push(`Memory per accelerator at TP ${p.tensorParallel}`);
  lines.push(`  usable    ${formatGib(m.usableBytes)} (${a.memoryGib} GiB x ${m.gpuMemoryUtilization})`);
  lines.push(`  weights   ${formatGib(plan.weightBytesPerRank)}`);
  lines.push(`  reserve   ${formatGib(m.reserveBytes)} (activations ${formatGib(m.activationReserveBytes)}, runtime ${formatGib(m.runtimeReserveBytes)})`);
  lines.push(`  KV cache  ${formatGib(plan.kvCacheBytesPerRank)}: ${formatInt(plan.kvTokens)} tokens and ${formatInt(plan.maxConcurrency)} sequences of ${ctx} tokens per replica`);
  lines.push('');

  lines.push(`Tensor-parallel options (one replica per pod${p.pipelineParallel > 1 || p.dataParallel > 1 ? ', other settings as given' : ''})`);
  const optionRows = plan.tensorParallelOptions.map(o => [
    String(o.tensorParallel),
    formatGib(o.weightBytesPerRank),
    formatGib(o.kvCacheBytesPerRank),
    formatInt(o.kvTokens),
    formatInt(o.maxConcurrency),
    String(o.replicasPerNode),
    String(o.efaInterfacesPerPod),
    (o.fits ? 'yes' : 'no') + (o.tensorParallel === p.tensorParallel ? '  <- plan' : ''),
  ]);
  lines.push(...renderTable(
    ['TP', 'weights/rank', 'KV/rank', 'KV tokens', `seqs @${ctx}`, 'replicas/node', 'EFA/pod', 'fits'],
    optionRows, [true, true, true, true, true, true, true, false]));
  lines.push('');

  lines.push('Time to first token (one prompt, idle replica)');
  lines.push(...renderTable(
    ['prompt tokens', 'TTFT', 'prefill tok/s', 'bound'],
    plan.prefillEstimates.map(e => [formatInt(e.promptTokens), formatSeconds(e.seconds), formatInt(e.tokensPerSecond), e.bound]),
    [true, true, true, false]));
  lines.push('');

  const priced = plan.pricePerHour !== undefined;
  lines.push(`Time per output token (each sequence at ${formatInt(plan.decodeContextTokens)} tokens of context)`);
  lines.push(...renderTable(
    ['batch', 'TPOT', 'output tok/s/replica', 'bound', ...(priced ? ['cost/M output tokens'] : []),
      plan.decodeContextTokens === plan.maxContext ? `KV fits (max ${formatInt(plan.maxConcurrency)})` : 'KV fits'],
    plan.decodeEstimates.map(e => [
      formatInt(e.batchSize),
      formatSeconds(e.stepSeconds),
      formatInt(e.tokensPerSecond),
      e.bound,
      ...(priced ? [e.costPerMillionOutputTokens!.toFixed(2)] : []),
      e.withinKvCapacity ? 'yes' : 'no',
    ]),
    [true, true, true, false, ...(priced ? [true] : []), false]));
  lines.push('');

  if (plan.notes.length > 0) {
    lines.push('Notes');
    lines.push(...plan.notes.map(n => `  - ${CliVocabulary.PLAN.speak(n)}`));
    lines.push('');
  }
  const r = plan.roofline;
  lines.push(
    `Assumptions: roofline estimates at ${pct(r.computeEfficiency)} of peak FLOP/s, ${pct(r.memoryBandwidthEfficiency)} of HBM bandwidth, ` +
    `${pct(r.interconnectEfficiency)} of link bandwidth, ${r.collectiveLatencyUs} us per collective; lower bounds on latency, not measurements.` +
    (priced ? ` Cost: ${plan.pricePerHour} per instance-hour, shared by the replicas on it, decode time only.` : '') +
    ' GiB = 2^30 bytes, GB = 1e9 bytes.');
  return lines;
}

function describeLayout(plan: ServingPlan): string {
  const p = plan.parallelism;
  const l = plan.layout;
  const parts = [`TP ${p.tensorParallel}${plan.tensorParallelChosen ? ` (chosen: ${plan.fits ? 'the smallest size that fits' : 'the largest valid size'})` : ''}`];
  if (p.pipelineParallel > 1) parts.push(`PP ${p.pipelineParallel}`);
  if (p.dataParallel > 1) parts.push(`DP ${p.dataParallel}`);
  if (p.expertParallel) parts.push(`expert parallel over ${p.expertParallelSize} ranks`);
  const placement = l.nodesPerReplica > 1
    ? `${l.podsPerReplica} pods (nodes) per replica`
    : `${l.replicasPerNode} replica${l.replicasPerNode === 1 ? '' : 's'} per node`;
  const type = plan.instanceType;
  // Pods that cannot each have an interface of their own get none (ParallelismRules.efaInterfacesPerPod).
  const nodeEfa = type.efaInterfacesFor(type.acceleratorCount);
  const shared = l.efaInterfacesPerPod === 0 && type.supportsEfa
    ? ` (${l.replicasPerNode} pods share the node's ${nodeEfa} EFA interface${nodeEfa === 1 ? '' : 's'}: ` +
      'KV moves over TCP; a larger tensorParallel gives each pod EFA)'
    : '';
  return `${parts.join(', ')}; ${placement}, ${l.acceleratorsPerPod} accelerator${l.acceleratorsPerPod === 1 ? '' : 's'} and ` +
    `${l.efaInterfacesPerPod} EFA interface${l.efaInterfacesPerPod === 1 ? '' : 's'} per pod${shared}`;
}

function pct(fraction: number): string {
  return `${Math.round(fraction * 100)}%`;
}

/** The plan as plain JSON (bytes as numbers; GiB helpers alongside). */
function planToJson(plan: ServingPlan, tpDefaulted = false): Record<string, unknown> {
  const t = plan.instanceType;
  const m = plan.memory;
  const r = plan.roofline;
  return {
    fits: plan.fits,
    problems: plan.problems.map(p => ({ ...p, message: CliVocabulary.PLAN.speak(p.message) })),
    notes: plan.notes.map(n => CliVocabulary.PLAN.speak(n)),
    model: {
      name: plan.model.name,
      huggingFaceId: plan.model.huggingFaceId,
      parametersTotal: plan.model.parametersTotal,
      parametersActive: plan.model.parametersActive,
      maxContext: plan.model.maxContext,
    },
    instanceType: {
      name: t.name,
      accelerator: t.accelerator.name,
      acceleratorCount: t.acceleratorCount,
      acceleratorMemoryGib: t.accelerator.memoryGib,
      maxEfaInterfaces: t.maxEfaInterfaces,
    },
    maxContext: plan.maxContext,
    weights: {
      description: plan.weights.description,
      expertPrecision: plan.weights.expertPrecision.name,
      densePrecision: plan.weights.densePrecision.name,
      totalBytes: plan.weights.totalBytes,
    },
    kvCache: {
      precision: plan.kvCache.precision.name,
      bytesPerToken: plan.kvCache.bytesPerToken,
      bytesPerSequencePerRank: plan.kvBytesPerSequencePerRank,
      blockSizeTokens: plan.kvBlockSize,
    },
    parallelism: {
      tensorParallel: plan.parallelism.tensorParallel,
      tensorParallelChosen: plan.tensorParallelChosen || tpDefaulted,
      pipelineParallel: plan.parallelism.pipelineParallel,
      dataParallel: plan.parallelism.dataParallel,
      expertParallel: plan.parallelism.expertParallel,
      expertParallelSize: plan.parallelism.expertParallelSize,
      redundantExperts: plan.parallelism.redundantExperts,
    },
    layout: plan.layout,
    memoryPerRank: {
      deviceBytes: m.deviceBytes,
      gpuMemoryUtilization: m.gpuMemoryUtilization,
      usableBytes: m.usableBytes,
      weightBytes: plan.weightBytesPerRank,
      activationReserveBytes: m.activationReserveBytes,
      runtimeReserveBytes: m.runtimeReserveBytes,
      kvCacheBytes: plan.kvCacheBytesPerRank,
      kvCacheGib: plan.kvCacheBytesPerRank / GIB,
    },
    kvTokens: plan.kvTokens,
    maxConcurrency: plan.maxConcurrency,
    validTensorParallelSizes: plan.validTensorParallelSizes,
    tensorParallelOptions: plan.tensorParallelOptions,
    estimates: {
      assumptions: {
        computeEfficiency: r.computeEfficiency,
        memoryBandwidthEfficiency: r.memoryBandwidthEfficiency,
        interconnectEfficiency: r.interconnectEfficiency,
        collectiveLatencyUs: r.collectiveLatencyUs,
        networkLatencyUs: r.networkLatencyUs,
        denseComputePrecision: r.denseComputePrecision.name,
        expertComputePrecision: r.expertComputePrecision.name,
        maxNumBatchedTokens: r.maxNumBatchedTokens,
      },
      pricePerHour: plan.pricePerHour ?? null,
      decodeContextTokens: plan.decodeContextTokens,
      prefill: plan.prefillEstimates,
      decode: plan.decodeEstimates,
    },
  };
}
