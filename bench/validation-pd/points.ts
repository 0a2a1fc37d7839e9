// The published P/D measurements of ../shared/validation (pd-published-calibration.json and its README),
// and how each point becomes `disagg-engine simulate` configurations: one per arm (aggregated,
// disaggregated) and load, built from the catalog model and instance, the engine generation of each arm
// (EngineProfile), the point's topology, its KV-transfer fabric and its traffic (a replayed request
// stream where the source published one, else its ISL/OSL at its arrival process or concurrency).
// Points are read by their fields, never by id: a point this file was not written for is expressed the
// same way, or reported with the reasons it cannot be.
import * as fs from 'fs';
import * as path from 'path';
import { Accelerator, AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { EngineCostConfig, SimulationConfig, WorkloadConfig } from '../../src/engine/engine-config';
import { costSections, planFor, simulationConfig } from '../../src/engine/engine-config-builder';
import { EngineProfile } from '../../src/engine/engine-profile';

/** The points file; PD_POINTS overrides it. */
export const DEFAULT_POINTS_FILE = path.resolve(__dirname, '..', '..', '..', 'shared', 'validation', 'pd-published-calibration.json');

/** Replayable request streams, by the file name a point's `measured.<arm>.file` gives. */
export const TRACE_DIRS = [path.join(__dirname, 'traces', 'distserve-opt13b-sharegpt')];

/** A point as the file records it (the fields this harness reads; everything else is free text). */
export interface PdPoint {
  readonly id: string;
  readonly kind: 'pd_vs_agg' | 'kv_transfer' | string;
  readonly model?: string;
  readonly precision?: { readonly weights?: string; readonly kv?: string } | null;
  readonly hardware?: { readonly gpu?: string; readonly interconnect?: string; readonly instance?: string | null; readonly [k: string]: unknown } | null;
  readonly engine?: { readonly both?: string; readonly aggregated?: string; readonly disaggregated?: string } | null;
  readonly topology?: { readonly aggregated?: string; readonly disaggregated?: string } | null;
  readonly kv_transfer?: { readonly connector?: string; readonly backend?: string } | null;
  readonly workload?: {
    readonly isl?: number | string | number[];
    readonly osl?: number | string;
    readonly arrival?: string;
    readonly rate?: string;
    readonly concurrency?: number | { readonly aggregated?: number; readonly disaggregated?: number };
    readonly requests?: number | string;
    readonly [k: string]: unknown;
  } | null;
  readonly slo?: unknown;
  readonly measured?: any;
  readonly headline?: { readonly metric?: string; readonly ratio?: number; readonly direction?: string; readonly [k: string]: unknown } | null;
  readonly completeness?: 'full' | 'partial' | 'headline-only' | string;
}

export function loadPoints(file: string = process.env.PD_POINTS ?? DEFAULT_POINTS_FILE): PdPoint[] {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as PdPoint[];
}

/** One pool of an arm: replicas x TP (x PP). */
export interface PoolTopology {
  readonly replicas: number;
  readonly tensorParallel: number;
  readonly pipelineParallel: number;
}

export interface ArmTopology {
  readonly aggregated?: PoolTopology;
  readonly prefill?: PoolTopology;
  readonly decode?: PoolTopology;
}

/** GPUs an arm uses. */
export function gpusOf(t: ArmTopology): number {
  const g = (p?: PoolTopology) => (p ? p.replicas * p.tensorParallel * p.pipelineParallel : 0);
  return g(t.aggregated) + g(t.prefill) + g(t.decode);
}

const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));

/**
 * An arm's topology from the source's words: '1 replica x TP1', '2 regular instances x TP4', '1 x TP4
 * (baseline_tp4dp1)'; '1 prefill x TP2 + 1 decode x TP1 PP2', '4 context workers x TP2 (node 1) + 1
 * generate worker x TP8'. Undefined when the words say nothing this reads.
 */
export function parseTopology(text: string | undefined, arm: 'aggregated' | 'disaggregated'): ArmTopology | undefined {
  if (!text) return undefined;
  const pool = (re: RegExp): PoolTopology | undefined => {
    const m = re.exec(text);
    return m ? { replicas: Number(m[1]), tensorParallel: Number(m[2]), pipelineParallel: num(m[3]) ?? 1 } : undefined;
  };
  if (arm === 'aggregated') {
    const a = pool(/(\d+)\s*(?:[a-z]+\s+)*?(?:replicas?|instances?)?\s*x\s*TP(\d+)(?:\s*PP(\d+))?/i);
    return a ? { aggregated: a } : undefined;
  }
  const prefill = pool(/(\d+)\s*(?:prefill|P|context)\b[^x+]*x\s*TP(\d+)(?:\s*PP(\d+))?/i);
  const decode = pool(/(\d+)\s*(?:decode|D|generate|generation)\b[^x+]*x\s*TP(\d+)(?:\s*PP(\d+))?/i);
  return prefill && decode ? { prefill, decode } : undefined;
}

/** A server's scale-out line rate from the point's words ('8x ConnectX-7 RoCE per node (~200 GB/s ...)'), Gbit/s. */
export function lineRateGbps(text: string | undefined): number | undefined {
  const m = /(\d+(?:\.\d+)?)\s*GB\/s[^;,)]*(aggregate|theoretical|line rate)/i.exec(text ?? '');
  return m ? Number(m[1]) * 8 : undefined;
}

/** The instance type whose accelerator a point's GPU is (a server of eight for GPUs EC2 does not carry), or undefined. */
export function instanceForGpu(gpu: string | undefined, interconnect?: string): AcceleratedInstanceType | undefined {
  if (!gpu) return undefined;
  const outside: Array<[RegExp, Accelerator]> = [[/H800/i, Accelerator.H800], [/H20(?!-3e)\b(?!.*1[34]\d\s*GB)/i, Accelerator.H20]];
  const h20e = /H20-3e\b(?:.*?(\d{3})\s*GB)?/i.exec(gpu);
  if (h20e) outside.push([/H20-3e/i, h20With141GbOf(Number(h20e[1] ?? 141))]);
  for (const [re, accelerator] of outside) {
    if (re.test(gpu)) {
      return AcceleratedInstanceType.server({ accelerator, acceleratorCount: 8, networkBandwidthGbps: lineRateGbps(interconnect) ?? 400 });
    }
  }
  const rules: Array<[RegExp, string]> = [
    [/GB200/i, 'p6e-gb200.36xlarge'],
    [/\bB200/i, 'p6-b200.48xlarge'],
    [/H200/i, 'p5en.48xlarge'],
    [/H100/i, 'p5.48xlarge'],
    [/A100[- ]?80/i, 'p4de.24xlarge'],
    [/A100/i, 'p4d.24xlarge'],
    [/L40S/i, 'g6e.12xlarge'],
    [/\bA10G?\b/i, 'g5.48xlarge'],
  ];
  for (const [re, name] of rules) {
    if (re.test(gpu)) {
      try {
        return AcceleratedInstanceType.fromName(name);
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * The H20 with HBM3e (H20-3e): the catalog's H20 (the same Hopper die and rates) with the memory the
 * point states. NVIDIA publishes no figure for its memory bandwidth; the H200's 4.8 TB/s from the same
 * HBM3e stacks is assumed, which a KV-transfer timing (the one point on it) does not read.
 */
function h20With141GbOf(memoryGb: number): Accelerator {
  const h20 = Accelerator.H20;
  return Accelerator.of({
    name: 'H20-3e',
    vendor: h20.vendor,
    memoryGib: memoryGb,
    hbmBandwidthGBps: Accelerator.H200.hbmBandwidthGBps,
    peakTflopsBf16: h20.peakTflops(Precision.BF16),
    peakTflopsFp8: h20.peakTflops(Precision.FP8),
    peakTopsInt8: h20.peakTflops(Precision.INT8),
    interconnectGBps: h20.interconnectGBps,
    interconnect: h20.interconnect,
    fp8Attention: h20.fp8Attention,
  });
}

/** Weight precision from the point's words. */
export function weightPrecisionOf(point: PdPoint): Precision | undefined {
  const text = `${point.precision?.weights ?? ''} ${point.model ?? ''}`;
  if (/NVFP4|FP4/i.test(text)) return Precision.FP4;
  if (/INT4|GPTQ|AWQ/i.test(text)) return Precision.INT4;
  if (/FP8/i.test(text)) return Precision.FP8;
  if (/FP16|half/i.test(text)) return Precision.FP16;
  if (/BF16/i.test(text)) return Precision.BF16;
  return undefined;
}

export function kvCachePrecisionOf(point: PdPoint, weights: Precision | undefined): Precision {
  const text = point.precision?.kv ?? '';
  if (/FP8/i.test(text)) return Precision.FP8;
  if (/BF16/i.test(text)) return Precision.BF16;
  if (/FP16/i.test(text)) return Precision.FP16;
  return weights === Precision.FP16 ? Precision.FP16 : Precision.BF16;
}

/** The catalog model a point names: its id, or the base model of a quantized checkpoint's id. */
export function modelOf(name: string | undefined): ModelArchitecture | undefined {
  if (!name) return undefined;
  // A dated instruct release ('Qwen3-235B-A22B-Instruct-2507') has its base model's layers and heads.
  const candidates = [name, name.replace(/-(GPTQ|AWQ)-Int\d|-FP8(-dynamic)?|-NVFP4/gi, ''), name.replace(/^[^/]+\//, ''), name.replace(/-Instruct-\d{4}$/i, '')];
  const base = name.replace(/-(GPTQ|AWQ)-Int\d|-FP8(-dynamic)?|-NVFP4/gi, '').replace(/^(neuralmagic|nvidia|RedHatAI)\//, '');
  candidates.push(base, `meta-llama/${base}`);
  for (const c of candidates) {
    try {
      return ModelArchitecture.fromName(c);
    } catch {
      // next spelling
    }
  }
  return undefined;
}

/** The KV-transfer path between a point's prefill and decode pods, in the cost model's terms. */
export interface TransferPath {
  readonly label: string;
  readonly bytesPerSecond: number;
  readonly latencySeconds: number;
}

/**
 * The fabric a point's KV moves over, from its words: an intra-node NVLink copy, RDMA (RoCE or
 * InfiniBand, at the line rate the point states), EFA (the instance's), or TCP. Undefined: the
 * instance's own network, as the constructs assume.
 */
export function transferPathOf(point: PdPoint, instance: AcceleratedInstanceType, prefillGpus: number): TransferPath | undefined {
  const text = `${point.kv_transfer?.backend ?? ''} ${point.kv_transfer?.connector ?? ''} ${point.hardware?.interconnect ?? ''}`;
  if (/NVLink/i.test(point.kv_transfer?.backend ?? '') || (/NVLink/i.test(text) && /within the node|intra-node|single node/i.test(text))) {
    // A GPU-to-GPU copy inside the node: every prefill GPU sends its shard over its own NVLink.
    return { label: 'NVLink copy', bytesPerSecond: instance.accelerator.interconnectGBps * 1e9 * prefillGpus, latencySeconds: 50e-6 };
  }
  if (/\bTCP\b/i.test(text) && !/RDMA|RoCE|EFA/i.test(text)) {
    return { label: 'TCP', bytesPerSecond: Math.min(instance.networkBandwidthGbps, 25) * 1e9 / 8, latencySeconds: 1e-3 };
  }
  const gbps = lineRateGbps(text);
  if (gbps !== undefined && /RDMA|RoCE|InfiniBand|ConnectX/i.test(text)) {
    return { label: 'RDMA', bytesPerSecond: (gbps * 1e9) / 8, latencySeconds: 100e-6 };
  }
  return undefined;
}

/** How a point's headline is measured, read from `headline.metric`. */
export type MetricKind =
  | { readonly kind: 'attainment'; readonly ttftSeconds: number; readonly tpotSeconds: number }
  | { readonly kind: 'goodput-per-gpu' }
  | { readonly kind: 'tokens-per-gpu' }
  | { readonly kind: 'itl-mean' }
  | { readonly kind: 'ttft-mean' };

export function metricOf(point: PdPoint): MetricKind | undefined {
  const m = point.headline?.metric ?? '';
  const slo = /TTFT\s*<=\s*(\d+(?:\.\d+)?)\s*(ms|s)\b.*TPOT\s*<=\s*(\d+(?:\.\d+)?)\s*(ms|s)\b/i.exec(m);
  if (/attainment/i.test(m) && slo) {
    const sec = (v: string, u: string) => Number(v) / (u === 'ms' ? 1000 : 1);
    return { kind: 'attainment', ttftSeconds: sec(slo[1], slo[2]), tpotSeconds: sec(slo[3], slo[4]) };
  }
  if (/goodput per GPU/i.test(m)) return { kind: 'goodput-per-gpu' };
  if (/tok\/s per GPU|tokens\/s per GPU|throughput per GPU/i.test(m)) return { kind: 'tokens-per-gpu' };
  if (/\bITL\b|inter-token/i.test(m)) return { kind: 'itl-mean' };
  if (/\bTTFT\b/i.test(m)) return { kind: 'ttft-mean' };
  return undefined;
}

/** One simulation of one arm at one load. */
export interface ArmRun {
  readonly arm: 'aggregated' | 'disaggregated';
  /** The arm's label in the point's measurements (e.g. 'pd_c21d12'); the arm otherwise. */
  readonly label: string;
  readonly gpus: number;
  readonly config: SimulationConfig;
  /** The per-GPU request rate of a sweep point, if any. */
  readonly ratePerGpu?: number;
  /** The SLO key of a goodput sweep (e.g. 'ttft250_tpot100'). */
  readonly sloKey?: string;
}

export interface ExpressedPoint {
  readonly point: PdPoint;
  readonly metric: MetricKind;
  readonly runs: ArmRun[];
  /** What was assumed beyond the point's own words (shown in the report). */
  readonly notes: string[];
}

export interface UnexpressedPoint {
  readonly point: PdPoint;
  readonly reasons: string[];
}

export function isExpressed(x: ExpressedPoint | UnexpressedPoint): x is ExpressedPoint {
  return (x as ExpressedPoint).runs !== undefined;
}

/** The trace file of a point's arm, when the source published its request stream. */
export function traceFileOf(name: string | undefined): string | undefined {
  if (!name) return undefined;
  const base = name.replace(/\.exp$/, '.jsonl');
  for (const dir of TRACE_DIRS) {
    const p = path.join(dir, base);
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}

/**
 * The published request streams of one configuration at every rate it was run at, named
 * `<prefix>-<requests>-<total rate>.jsonl` (DistServe's artifact), by total rate: the full run at each
 * rate (100 x rate requests, DistServe's rule), not its short probes.
 */
export function sweepTraces(prefix: string): Array<{ file: string; rate: number }> {
  const out: Array<{ file: string; rate: number }> = [];
  for (const dir of TRACE_DIRS.filter(d => fs.existsSync(d))) {
    for (const f of fs.readdirSync(dir)) {
      const n = /^(.*)-(\d+)-(\d+(?:\.\d+)?)\.jsonl$/.exec(f);
      if (n && n[1] === prefix && Math.abs(Number(n[2]) - 100 * Number(n[3])) < 1) out.push({ file: path.join(dir, f), rate: Number(n[3]) });
    }
  }
  return out.sort((a, b) => a.rate - b.rate);
}

/** 'ttft250_tpot100' -> the SLO in seconds. */
export function sloOfKey(key: string): { ttftSeconds: number; tpotSeconds: number } | undefined {
  const m = /ttft(\d+)_tpot(\d+)/i.exec(key);
  return m ? { ttftSeconds: Number(m[1]) / 1000, tpotSeconds: Number(m[2]) / 1000 } : undefined;
}

function fixedOr(v: number | string | number[] | undefined): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && /^\d+(\.\d+)?$/.test(v.trim())) return Number(v);
  const m = typeof v === 'string' ? /^(\d+)\s*\(/.exec(v.trim()) : null;
  return m ? Number(m[1]) : undefined;
}

/** The ISL/OSL traffic of a point: closed loop at its concurrency, or its request rate. */
function syntheticWorkload(point: PdPoint, arm: 'aggregated' | 'disaggregated'): { workload?: WorkloadConfig; reason?: string } {
  const w = point.workload ?? {};
  const isl = fixedOr(w.isl);
  const osl = fixedOr(w.osl);
  if (isl === undefined || osl === undefined) return { reason: `no fixed prompt/output length to simulate (isl ${JSON.stringify(w.isl)}, osl ${JSON.stringify(w.osl)})` };
  const c = typeof w.concurrency === 'number' ? w.concurrency : w.concurrency?.[arm];
  const requestsText = typeof w.requests === 'number' ? String(w.requests) : String(w.requests ?? '');
  const base = { inputTokens: { distribution: 'fixed' as const, mean: isl }, outputTokens: { distribution: 'fixed' as const, mean: osl }, api: 'completions' as const };
  if (c !== undefined && /closed loop|concurrency/i.test(`${w.arrival ?? ''} ${JSON.stringify(w.concurrency)}`)) {
    const times = /(\d+)\s*x\s*concurrency/i.exec(requestsText);
    const requests = times ? Number(times[1]) * c : Number(requestsText) || 10 * c;
    return { workload: { kind: 'single', concurrency: c, requests, ...base } };
  }
  const rate = /(\d+(?:\.\d+)?)\s*req\/s/i.exec(`${w.arrival ?? ''} ${w.rate ?? ''}`);
  if (rate) {
    const requests = Number(requestsText) || 200;
    return { workload: { kind: 'single', requests, arrival: { process: 'poisson', ratePerSecond: Number(rate[1]) }, ...base } };
  }
  return { reason: `no arrival process this harness reads ('${w.arrival ?? ''}')` };
}

/** Expresses a point, or says why it cannot be. */
export function expressPoint(point: PdPoint): ExpressedPoint | UnexpressedPoint {
  const reasons: string[] = [];
  const notes: string[] = [];
  if (point.kind !== 'pd_vs_agg') {
    return { point, reasons: [`kind '${point.kind}': a KV-transfer timing with no aggregated arm, which this harness does not score yet`] };
  }
  if (point.completeness === 'headline-only') reasons.push('headline only: the source gives no configuration to simulate');
  const model = modelOf(point.model);
  if (!model) reasons.push(`the catalog has no model '${point.model}'`);
  const instance = instanceForGpu(point.hardware?.gpu, point.hardware?.interconnect);
  if (!instance) reasons.push(`no catalog instance type has the GPU '${point.hardware?.gpu}'`);
  const metric = metricOf(point);
  if (!metric) reasons.push(`no simulated measure for the headline metric '${point.headline?.metric ?? ''}'`);
  const agg = parseTopology(point.topology?.aggregated, 'aggregated');
  const pd = parseTopology(point.topology?.disaggregated, 'disaggregated');
  if (!agg) reasons.push(`the aggregated topology '${point.topology?.aggregated ?? ''}' is not 'N x TPn'`);
  if (!pd) reasons.push(`the disaggregated topology '${point.topology?.disaggregated ?? ''}' is not 'N prefill x TPn + N decode x TPn'`);
  if (reasons.length > 0 || !model || !instance || !metric || !agg || !pd) return { point, reasons };

  const weights = weightPrecisionOf(point) ?? model.nativePrecision;
  const kv = kvCachePrecisionOf(point, weights);
  const profiles = {
    aggregated: EngineProfile.fromDescription(point.engine?.aggregated ?? point.engine?.both ?? ''),
    disaggregated: EngineProfile.fromDescription(point.engine?.disaggregated ?? point.engine?.both ?? ''),
  };
  notes.push(`engines: aggregated ${profiles.aggregated.name}, P/D ${profiles.disaggregated.name}`);
  const prefillGpus = pd.prefill!.tensorParallel * pd.prefill!.pipelineParallel;
  const transfer = transferPathOf(point, instance, prefillGpus);
  if (transfer) notes.push(`KV over ${transfer.label} at ${(transfer.bytesPerSecond / 1e9).toFixed(0)} GB/s`);

  const runs: ArmRun[] = [];
  const build = (arm: 'aggregated' | 'disaggregated', topology: ArmTopology, workload: WorkloadConfig, slo?: { ttftSeconds: number; tpotSeconds: number },
    extra: { label?: string; ratePerGpu?: number; sloKey?: string } = {}): void => {
    const profile = profiles[arm];
    const shape = (p: PoolTopology) => ({ replicas: p.replicas, tensorParallel: p.tensorParallel * p.pipelineParallel });
    let config = simulationConfig({
      model,
      instanceType: instance,
      weightPrecision: weights,
      kvCachePrecision: kv,
      maxContext: Math.min(model.maxContext, 32768),
      ...(arm === 'aggregated' ? { aggregated: shape(topology.aggregated!) } : { prefill: shape(topology.prefill!), decode: shape(topology.decode!) }),
      // Every request through the prefill pool: the sources' P/D arms disaggregate every request.
      policy: arm === 'aggregated' ? { name: 'round-robin' } : { name: 'kv-aware', disaggregation: { minUncachedPromptTokens: 0 } } as any,
      workload,
      ...(slo ? { slo } : {}),
      asyncScheduling: profile.asyncScheduling,
    });
    const stagesOf = (role: string) => (role === 'prefill' ? topology.prefill : role === 'decode' ? topology.decode : topology.aggregated)!.pipelineParallel;
    config = profile.applyTo(config);
    config = {
      ...config,
      pools: config.pools!.map(p => ({
        ...p,
        // Pipeline stages: sized above as TP x PP ranks (the same weights and KV per rank); stepped as PP.
        ...(stagesOf(p.role!) > 1 ? {
          tensorParallel: p.tensorParallel! / stagesOf(p.role!),
          pipelineParallel: stagesOf(p.role!),
          parallel: { ...(p.parallel ?? {}), tensorParallel: p.tensorParallel! / stagesOf(p.role!), pipelineParallel: stagesOf(p.role!) },
        } : {}),
        ...(arm === 'disaggregated' && transfer ? {
          // The connector's fixed cost where the engine has a published one, else the path's own latency;
          // the fabric latency stays the expert-parallel messages'.
          hardware: {
            ...(p.hardware ?? config.hardware!),
            fabricBytesPerSecond: transfer.bytesPerSecond,
            kvTransferLatencySeconds: profile.kvTransferLatencySeconds ?? transfer.latencySeconds,
          },
        } : {}),
      })),
    };
    runs.push({ arm, label: extra.label ?? arm, gpus: gpusOf(topology), config, ratePerGpu: extra.ratePerGpu, sloKey: extra.sloKey });
  };

  const attainmentSlo = metric.kind === 'attainment' ? { ttftSeconds: metric.ttftSeconds, tpotSeconds: metric.tpotSeconds } : undefined;
  if (metric.kind === 'goodput-per-gpu') {
    // The sweep the source ran: each configuration of its goodput table over every rate it was run at.
    const table: Record<string, Record<string, unknown>> = point.measured?.goodput_req_s_per_gpu ?? {};
    const sloKeys = Object.keys(table).filter(k => sloOfKey(k));
    const labels = [...new Set(sloKeys.flatMap(k => Object.keys(table[k])))];
    if (sloKeys.length === 0 || labels.length === 0) return { point, reasons: ['a goodput headline without a goodput_req_s_per_gpu table by SLO'] };
    for (const label of labels) {
      const arm = /^pd_/.test(label) ? 'disaggregated' as const : 'aggregated' as const;
      const config = label.replace(/^(pd|aggregated)_/, '');
      const segment = arm === 'aggregated' ? point.topology?.aggregated
        : new RegExp(`${config}:([^;]*)`).exec(point.topology?.disaggregated ?? '')?.[1] ?? point.topology?.disaggregated;
      const topology = parseTopology(segment, arm);
      const sweep = sweepTraces(arm === 'aggregated' ? config : `distserve-${config}`);
      if (!topology || sweep.length === 0) return { point, reasons: [`${label}: ${!topology ? `topology '${segment}' not read` : 'no published request streams to sweep'}`] };
      for (const s of sweep) {
        for (const key of sloKeys) {
          build(arm, topology, { kind: 'trace', trace: { path: s.file, blockTokens: 16 } }, sloOfKey(key), { label, ratePerGpu: s.rate / gpusOf(topology), sloKey: key });
        }
      }
    }
    return { point, metric, runs, notes };
  }
  for (const arm of ['aggregated', 'disaggregated'] as const) {
    const topology = arm === 'aggregated' ? agg : pd;
    const file = traceFileOf(point.measured?.[arm]?.file);
    if (file) {
      build(arm, topology, { kind: 'trace', trace: { path: file, blockTokens: 16 } }, attainmentSlo);
      continue;
    }
    const synthetic = syntheticWorkload(point, arm);
    if (!synthetic.workload) return { point, reasons: [`${arm}: ${synthetic.reason}`] };
    build(arm, topology, synthetic.workload, attainmentSlo);
  }
  return { point, metric, runs, notes };
}

/** A KV-transfer timing point: the prompt lengths moved and the transfer time the source measured for each. */
export interface ExpressedTransfer {
  readonly point: PdPoint;
  readonly config: EngineCostConfig;
  readonly tokens: number[];
  readonly measuredMs: number[];
  /** The KV bytes the source says each transfer moved (its `kv_size` column), where it gives them. */
  readonly measuredBytes?: number[];
  readonly notes: string[];
}

/** '49 MB', '1.58 GB' (decimal units, as Mooncake's tables print them) -> bytes. */
export function bytesOf(text: unknown): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB)\s*$/i.exec(String(text));
  return m ? Number(m[1]) * { KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12 }[m[2].toUpperCase() as 'KB' | 'MB' | 'GB' | 'TB'] : undefined;
}

/**
 * A `kv_transfer` point as the cost model's inputs (one prefill pod's model, hardware and fabric) and
 * its table of (prompt tokens, transfer ms), or the reasons it cannot be.
 */
export function expressTransfer(point: PdPoint): ExpressedTransfer | UnexpressedPoint {
  const reasons: string[] = [];
  const model = modelOf(point.model);
  if (!model) reasons.push(`the catalog has no model '${point.model}'`);
  const instance = instanceForGpu(point.hardware?.gpu, point.hardware?.interconnect);
  if (!instance) reasons.push(`no catalog accelerator for the GPU '${point.hardware?.gpu}'`);
  const columns: string[] = point.measured?.columns ?? [];
  const rows: unknown[][] = point.measured?.rows ?? [];
  const ti = columns.indexOf('prompt_len');
  const mi = columns.indexOf('transfer_ms');
  if (ti < 0 || mi < 0 || rows.length === 0) reasons.push('no table of prompt_len and transfer_ms');
  const pd = parseTopology(point.topology?.disaggregated, 'disaggregated');
  if (!pd) reasons.push(`the topology '${point.topology?.disaggregated ?? ''}' is not 'N prefill x TPn + N decode x TPn'`);
  if (reasons.length > 0 || !model || !instance || !pd) return { point, reasons };
  const weights = weightPrecisionOf(point) ?? model.nativePrecision;
  const plan = planFor({ model, weightPrecision: weights, kvCachePrecision: kvCachePrecisionOf(point, weights), maxContext: model.maxContext }, instance,
    pd.prefill!.tensorParallel);
  const sections = costSections(plan, weights);
  const profile = EngineProfile.fromDescription(point.engine?.both ?? point.engine?.disaggregated ?? '');
  const transfer = transferPathOf(point, instance, pd.prefill!.tensorParallel);
  const hardware = {
    ...sections.hardware,
    ...(transfer ? { fabricBytesPerSecond: transfer.bytesPerSecond } : {}),
    ...(profile.kvTransferLatencySeconds ?? transfer?.latencySeconds) !== undefined
      ? { kvTransferLatencySeconds: profile.kvTransferLatencySeconds ?? transfer!.latencySeconds } : {},
  };
  const si = columns.indexOf('kv_size');
  const measuredBytes = si >= 0 ? rows.map(r => bytesOf(r[si])) : [];
  const efficiency = profile.kvTransferEfficiency !== undefined ? { ...sections.efficiency, fabric: profile.kvTransferEfficiency } : sections.efficiency;
  return {
    point,
    config: { ...sections, hardware, ...(efficiency ? { efficiency } : {}) },
    tokens: rows.map(r => Number(r[ti])),
    measuredMs: rows.map(r => Number(r[mi])),
    ...(measuredBytes.length > 0 && measuredBytes.every(b => b !== undefined) ? { measuredBytes: measuredBytes as number[] } : {}),
    notes: [`engine ${profile.name}`, ...(transfer ? [`KV over ${transfer.label} at ${(transfer.bytesPerSecond / 1e9).toFixed(0)} GB/s`] : [])],
  };
}
