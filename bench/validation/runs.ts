// The real vLLM serving runs of ../shared/validation (vllm-runs-calibration.json and its README),
// and how each one is expressed as a `disagg-engine simulate` configuration: the catalog model and
// instance, vLLM's limits (max_num_seqs, max_num_batched_tokens, gpu_memory_utilization, block size,
// the CPU offload pool), and the client's traffic replayed exactly as a JSONL trace (the simulator's
// `trace` workload):
//   - arrivals evenly spaced at each stage's rate, stages back to back (inference-perf's
//     constant-rate stages);
//   - inference-perf's shared_prefix generator: num_unique_system_prompts groups x
//     num_users_per_system_prompt prompts, each prompt = its group's system prompt + a question of
//     its own, generated once and shuffled; request k sends prompt (k mod prompts), so a prompt
//     repeats every `prompts` requests and vLLM's prefix cache sees its full blocks again;
//   - the trace names 16-token blocks (vLLM's block size): the group's system-prompt blocks, then
//     the prompt's own blocks; the tail shorter than a block is fresh (vLLM caches full blocks only);
//   - prompt length: the measured mean where the run records it, else the nominal length + 30
//     tokens (the README: measured prompts are 24-37 tokens longer, template and tokenizer);
//     output length: the nominal one (ignore_eos: vLLM generates exactly max_tokens).
// Nothing here is fitted to a run: every number is the run's configuration or the catalog's.
import * as fs from 'fs';
import * as path from 'path';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { SimulationConfig } from '../../src/engine/engine-config';
import { simulationConfig } from '../../src/engine/engine-config-builder';

/** The runs file; VALIDATION_RUNS overrides it. */
export const DEFAULT_RUNS_FILE = path.resolve(__dirname, '..', '..', '..', 'shared', 'validation', 'vllm-runs-calibration.json');

/** Summary latencies in milliseconds (the README's score reads the means). */
export interface MeasuredSummary {
  readonly e2e_mean: number;
  readonly ttft_mean: number;
  readonly itl_mean: number;
  readonly e2e_p90?: number;
  readonly ttft_p90?: number;
}

/** One run as the file records it (the fields this harness reads). */
export interface ValidationRun {
  readonly id: number;
  readonly source_name: string;
  readonly model: string;
  readonly gpu: string;
  readonly tp: number;
  readonly vllm: {
    readonly max_num_seqs: number;
    readonly max_num_batched_tokens: number;
    readonly max_model_len: number;
    readonly gpu_memory_utilization: number;
    readonly block_size: number;
    readonly cpu_offload: boolean;
  };
  readonly workload: {
    readonly preset: string;
    readonly stages: ReadonlyArray<{ readonly rate_rps: number; readonly duration_s: number }>;
    readonly system_prompt_len: number;
    readonly question_len: number;
    readonly isl_nominal: number;
    readonly osl: number;
    readonly num_unique_system_prompts: number;
    readonly num_users_per_system_prompt: number;
  };
  readonly measured: {
    readonly summary: MeasuredSummary;
    readonly legacy_extra?: { readonly prompt_len_mean_tokens?: number; readonly output_len_mean_tokens?: number };
  };
  /** Signed percentage errors of published simulators on this run, by simulator. */
  readonly errors_signed_pct: { readonly [simulator: string]: { readonly e2e_mean?: number; readonly ttft_mean?: number; readonly itl_mean?: number } };
}

export function loadRuns(file: string = process.env.VALIDATION_RUNS ?? DEFAULT_RUNS_FILE): ValidationRun[] {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as ValidationRun[];
}

/**
 * Runs kept out of the fit of the step model's constants (src/engine/vllm-step-model.ts and the
 * catalog's decodeMemoryEfficiency): about a third of the runs, spread over the models, tensor-parallel
 * sizes and accelerators (every one but the L40S, which has a single run). The score is reported on
 * the fitted runs, on these and on all.
 */
export const HELD_OUT_RUNS: ReadonlySet<number> = new Set([10, 18, 26, 40, 53, 58]);

/** The README's note: measured prompts are 24-37 tokens longer than nominal (template, tokenizer). */
export const PROMPT_OVERHEAD_TOKENS = 30;
/** vLLM's --block-size in every run, and the trace's block. */
const TRACE_BLOCK_TOKENS = 16;
/** The CPU pool of vLLM's OffloadingConnector in the runs that had one (README: 8 GiB). */
const CPU_OFFLOAD_GIB = 8;

/** The instance whose accelerator the run used (TP fits in one node in every run). */
const INSTANCE_OF_GPU: Record<string, string> = {
  'H100': 'p5.48xlarge',
  'A100-80GB': 'p4de.24xlarge',
  'L40S': 'g6e.12xlarge',
};

export interface ExpressedRun {
  readonly run: ValidationRun;
  readonly config: SimulationConfig;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly requests: number;
}

export interface UnexpressedRun {
  readonly run: ValidationRun;
  readonly reasons: string[];
}

/** Prompt and output tokens of every request of `run`. */
export function requestShape(run: ValidationRun): { inputTokens: number; outputTokens: number } {
  const measured = run.measured.legacy_extra?.prompt_len_mean_tokens;
  return {
    inputTokens: Math.round(measured ?? run.workload.isl_nominal + PROMPT_OVERHEAD_TOKENS),
    outputTokens: run.workload.osl,
  };
}

/** Deterministic shuffle (splitmix64-driven Fisher-Yates): the client shuffled its prompts once. */
function shuffled(n: number, seed: number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  let s = BigInt(seed) & 0xffffffffffffffffn;
  const next = (): bigint => {
    s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    return z ^ (z >> 31n);
  };
  for (let i = n - 1; i > 0; i--) {
    const j = Number(next() % BigInt(i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** The run's traffic as JSONL trace lines (see the file comment); returns the text and the count. */
export function traceFor(run: ValidationRun): { jsonl: string; requests: number } {
  const w = run.workload;
  const { inputTokens, outputTokens } = requestShape(run);
  const groups = w.num_unique_system_prompts;
  const users = w.num_users_per_system_prompt;
  const prompts = groups * users;
  const order = shuffled(prompts, run.id);
  const systemBlocks = Math.floor(w.system_prompt_len / TRACE_BLOCK_TOKENS);
  const promptBlocks = Math.floor(inputTokens / TRACE_BLOCK_TOKENS);
  // Block ids: group g's system blocks first, then prompt p's own blocks.
  const ownBlocks = promptBlocks - systemBlocks;
  const groupBase = (g: number) => g * systemBlocks;
  const promptBase = (p: number) => groups * systemBlocks + p * ownBlocks;
  const lines: string[] = [];
  let startMs = 0;
  let k = 0;
  for (const stage of w.stages) {
    const count = Math.round(stage.rate_rps * stage.duration_s);
    for (let i = 0; i < count; i++, k++) {
      const p = order[k % prompts];
      const g = Math.floor(p / users);
      const ids: number[] = [];
      for (let b = 0; b < systemBlocks; b++) ids.push(groupBase(g) + b);
      for (let b = 0; b < ownBlocks; b++) ids.push(promptBase(p) + b);
      const t = startMs + (i * 1000) / stage.rate_rps;
      lines.push(`{"timestamp_ms": ${t.toFixed(3)}, "input_length": ${inputTokens}, "output_length": ${outputTokens}, "hash_ids": [${ids.join(',')}]}`);
    }
    startMs += stage.duration_s * 1000;
  }
  return { jsonl: lines.join('\n') + '\n', requests: k };
}

/**
 * `run` as a simulation configuration (its trace written under `dir`), or the reasons it cannot be
 * expressed with the catalog and the simulator as they are.
 */
export function expressRun(run: ValidationRun, dir: string): ExpressedRun | UnexpressedRun {
  const reasons: string[] = [];
  let model: ModelArchitecture | undefined;
  try {
    // Base checkpoints resolve to their Instruct entries (same architecture: otherHuggingFaceIds).
    model = ModelArchitecture.fromName(run.model);
  } catch {
    reasons.push(`the catalog has no model '${run.model}'`);
  }
  let instanceType: AcceleratedInstanceType | undefined;
  const instanceName = INSTANCE_OF_GPU[run.gpu];
  if (!instanceName) {
    reasons.push(`no instance type is mapped for GPU '${run.gpu}'`);
  } else {
    try {
      instanceType = AcceleratedInstanceType.fromName(instanceName);
    } catch {
      reasons.push(`the catalog has no instance type '${instanceName}' (${run.gpu})`);
    }
  }
  if (run.vllm.block_size !== TRACE_BLOCK_TOKENS) reasons.push(`block size ${run.vllm.block_size} (the trace names ${TRACE_BLOCK_TOKENS}-token blocks)`);
  if (!model || !instanceType || reasons.length > 0) return { run, reasons };

  const { jsonl, requests } = traceFor(run);
  const tracePath = path.join(dir, `run-${run.id}.jsonl`);
  fs.writeFileSync(tracePath, jsonl);
  const { inputTokens, outputTokens } = requestShape(run);
  let config: SimulationConfig;
  try {
    config = simulationConfig({
      model,
      instanceType,
      weightPrecision: Precision.BF16,
      kvCachePrecision: Precision.BF16,
      maxContext: run.vllm.max_model_len,
      gpuMemoryUtilization: run.vllm.gpu_memory_utilization,
      kvBlockSize: run.vllm.block_size,
      aggregated: { replicas: 1, tensorParallel: run.tp },
      policy: { name: 'round-robin' },
      ...(run.vllm.cpu_offload ? { kvTiers: { hostGib: CPU_OFFLOAD_GIB } } : {}),
      workload: { kind: 'trace', trace: { path: tracePath, blockTokens: TRACE_BLOCK_TOKENS } },
    });
  } catch (e) {
    return { run, reasons: [(e as Error).message] };
  }
  // vLLM's scheduler limits of the run.
  const pools = config.pools!.map(p => ({
    ...p,
    maxConcurrencyPerReplica: run.vllm.max_num_seqs,
    maxBatchedTokens: run.vllm.max_num_batched_tokens,
  }));
  return { run, config: { ...config, pools }, inputTokens, outputTokens, requests };
}

export function isExpressed(r: ExpressedRun | UnexpressedRun): r is ExpressedRun {
  return (r as ExpressedRun).config !== undefined;
}
