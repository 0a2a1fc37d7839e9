import { EngineConfig } from './engine-config';

/** Scheduler knobs of one pool that an engine generation decides (a subset of the engine's pool config). */
export interface EngineSchedulerKnobs {
  /** Prompt chunks mixed with decodes in one step (vLLM V1, SGLang), or whole-prompt prefill-first steps (vLLM V0). */
  readonly chunkedPrefill: boolean;
  /** The next step is planned while the current one runs. */
  readonly asyncScheduling: boolean;
  /**
   * When a P/D request's client sees its first token (read on decode pools): the decode side's first
   * step after the KV transfer (vLLM's NixlConnector), when the KV and the prefill's sampled token reach
   * the decode side (DistServe, SGLang), or as soon as the prefill samples it (TensorRT-LLM).
   */
  readonly firstTokenAt: 'decode-step' | 'transfer' | 'prefill';
  /** CPU seconds per sequence in every step (scheduling, sampling, detokenization, streaming) that the GPU waits for. */
  readonly sequenceOverheadSeconds: number;
  /**
   * The fixed cost of one P/D KV transfer besides its bytes (the connector's handshake, notification and
   * first round trips), where a published timing gives one.
   * @default - the fabric's latency
   */
  readonly kvTransferLatencySeconds?: number;
  /**
   * The share of the fabric's line rate the connector's transfers reach once their bytes dominate
   * (efficiency.fabric), where a published timing gives one.
   * @default - efficiency.fabric's default, 0.7 (vLLM's MooncakeConnector reaches about 72%)
   */
  readonly kvTransferEfficiency?: number;
}

/**
 * Fixed cost of one KV transfer of vLLM's P/D connectors: Mooncake's table for vLLM's MooncakeConnector
 * on H800 with 8x ConnectX-7 RoCE (kvcache-ai/Mooncake docs/source/performance/vllm/vllm-v1-pd-performance.md,
 * vLLM 0.11.2): 0.54 ms for 20 MB, 31.65 ms for 4.5 GB, i.e. about 0.4 ms plus the bytes at ~72% of the line rate.
 */
export const VLLM_KV_TRANSFER_LATENCY_SECONDS = 0.4e-3;
/**
 * The same for SGLang's P/D with Mooncake (Mooncake docs/source/performance/sglang/sglang-benchmark-results-v1.md,
 * H20 with 4x 400 GbE): 2.07 ms for 49 MB, 76.78 ms for 12.6 GB, i.e. about 1.8 ms plus the bytes at ~84%.
 */
export const SGLANG_KV_TRANSFER_LATENCY_SECONDS = 1.8e-3;
/** The line-rate share of the same SGLang table: 12.6 GB in 76.78 ms less the fixed 1.8 ms is 168 GB/s of 200. */
export const SGLANG_KV_TRANSFER_EFFICIENCY = 0.84;

/**
 * The serving engine generation a simulated pool behaves as: how its scheduler batches prompts and
 * decodes. Published P/D results come from engines that batch differently (vLLM's V0 engine ran whole
 * prompts in steps of their own and stalled every decode meanwhile; vLLM V1 and SGLang mix prompt
 * chunks into decode steps), and that difference decides much of what disaggregation gains.
 *
 * What each changes, and its source:
 * - `VLLM_V1` (default): chunked prefill always on (vLLM V1 engine, default since 0.8.0; the V0 engine was
 *   removed in 0.11), async scheduling on (default since 0.14, vllm-project/vllm #27614).
 * - `VLLM_V1_SYNC`: vLLM V1 before 0.14: chunked prefill, no async scheduling.
 * - `VLLM_V0`: vLLM's V0 engine without `--enable-chunked-prefill` (its default for contexts up to 32K):
 *   a step runs either waiting prompts or the running decodes, prompts first (DistServe's and Splitwise's
 *   vLLM baseline, early 2024).
 * - `DISTSERVE`: the DistServe prototype (OSDI'24, LLMServe/DistServe): its context instances batch
 *   whole prompts, its decode instances only decode; no chunking, no overlap.
 * - `SGLANG`: chunked prefill on (`--chunked-prefill-size`, on by default) and the overlap scheduler
 *   (on by default since v0.4), which plans the next batch while the GPU runs the current one; its
 *   Mooncake transfers pay 1.8 ms and reach 84% of the line rate (Mooncake's SGLang table).
 * - `TRTLLM`: TensorRT-LLM's `trtllm-serve` with chunked context and the overlap scheduler on, as its
 *   disaggregated-serving examples run it.
 */
/**
 * CPU time per running sequence per step of vLLM's V0 engine, which the GPU waited for (scheduling,
 * sampling bookkeeping, detokenization and streaming ran in the engine's own Python process between
 * steps). vLLM's v0.6.0 performance update (https://blog.vllm.ai/2024/09/05/perf-update.html) profiled
 * v0.5.3 serving Llama-3-8B on one H100: the API server took 33% and scheduling 29% of the time, the GPU
 * worked 38% of it, and v0.6.0 cut TPOT by 5x at 32 QPS by taking that work off the step. At the batch
 * that load keeps (on the order of 100-200 sequences) and its ~10 ms GPU steps, 62% of the time is
 * ~16 ms of CPU per step: about 0.1 ms per sequence.
 */
export const V0_SEQUENCE_OVERHEAD_SECONDS = 1e-4;

export class EngineProfile {
  public static readonly VLLM_V1 = new EngineProfile('vllm-v1', {
    chunkedPrefill: true, asyncScheduling: true, firstTokenAt: 'decode-step', sequenceOverheadSeconds: 0, kvTransferLatencySeconds: VLLM_KV_TRANSFER_LATENCY_SECONDS,
  });
  public static readonly VLLM_V1_SYNC = new EngineProfile('vllm-v1-sync', {
    chunkedPrefill: true, asyncScheduling: false, firstTokenAt: 'decode-step', sequenceOverheadSeconds: 0, kvTransferLatencySeconds: VLLM_KV_TRANSFER_LATENCY_SECONDS,
  });
  public static readonly VLLM_V0 = new EngineProfile('vllm-v0', {
    chunkedPrefill: false, asyncScheduling: false, firstTokenAt: 'decode-step', sequenceOverheadSeconds: V0_SEQUENCE_OVERHEAD_SECONDS,
  });
  public static readonly DISTSERVE = new EngineProfile('distserve', {
    chunkedPrefill: false, asyncScheduling: false, firstTokenAt: 'transfer', sequenceOverheadSeconds: V0_SEQUENCE_OVERHEAD_SECONDS,
  });
  public static readonly SGLANG = new EngineProfile('sglang', {
    chunkedPrefill: true,
    asyncScheduling: true,
    firstTokenAt: 'transfer',
    sequenceOverheadSeconds: 0,
    kvTransferLatencySeconds: SGLANG_KV_TRANSFER_LATENCY_SECONDS,
    kvTransferEfficiency: SGLANG_KV_TRANSFER_EFFICIENCY,
  });
  public static readonly TRTLLM = new EngineProfile('trtllm', { chunkedPrefill: true, asyncScheduling: true, firstTokenAt: 'prefill', sequenceOverheadSeconds: 0 });

  /** Every profile, for help texts and errors. */
  public static all(): EngineProfile[] {
    return [EngineProfile.VLLM_V1, EngineProfile.VLLM_V1_SYNC, EngineProfile.VLLM_V0, EngineProfile.DISTSERVE, EngineProfile.SGLANG,
      EngineProfile.TRTLLM];
  }

  /** The profile of a name (`vllm-v0`, `vllm-v1`, `vllm-v1-sync`, `distserve`, `sglang`, `trtllm`). */
  public static fromName(name: string): EngineProfile {
    const found = EngineProfile.all().find(p => p.name === name.trim().toLowerCase());
    if (!found) {
      throw new Error(`unknown engine '${name}'; use one of ${EngineProfile.all().map(p => p.name).join(', ')}`);
    }
    return found;
  }

  /**
   * The profile a source's description of its engine names ('vLLM (early-2024 release, V0 engine, no
   * chunked prefill)', 'SGLang (~v0.4.5)', 'TensorRT-LLM', 'DistServe prototype', 'vLLM 0.11.2'): the
   * engine, and for vLLM its generation by the words or the release. Unknown words give VLLM_V1.
   */
  public static fromDescription(text: string): EngineProfile {
    // The engine a description names first is the one that ran ('vLLM (... DistServe artifact era ...)' is vLLM).
    const engines: Array<[RegExp, EngineProfile | 'vllm']> = [
      [/DistServe/i, EngineProfile.DISTSERVE], [/SGLang/i, EngineProfile.SGLANG], [/TensorRT-LLM|trtllm/i, EngineProfile.TRTLLM], [/vLLM/i, 'vllm'],
    ];
    const named = engines.map(([re, p]) => ({ at: text.search(re), p })).filter(e => e.at >= 0).sort((a, b) => a.at - b.at)[0];
    if (named && named.p !== 'vllm') return named.p;
    // A release is three numbers ('0.11.2'), not a setting such as 'gpu-memory-utilization 0.9'.
    const release = /\bv?0\.(\d+)\.\d+/.exec(text);
    if (release) {
      const minor = Number(release[1]);
      if (minor < 8) return EngineProfile.VLLM_V0;
      if (minor < 14) return EngineProfile.VLLM_V1_SYNC;
      return EngineProfile.VLLM_V1;
    }
    // V1 became vLLM's default engine in 0.8.0 (March 2025): a vLLM of 2024 ran V0.
    if (/\bV0\b|no chunked prefill|\b2024\b/i.test(text)) return EngineProfile.VLLM_V0;
    return EngineProfile.VLLM_V1;
  }

  private constructor(public readonly name: string, private readonly knobs: EngineSchedulerKnobs) {}

  /** Whether prompt chunks share steps with decodes. */
  public get chunkedPrefill(): boolean {
    return this.knobs.chunkedPrefill;
  }

  /** Whether the next step is planned while the current one runs. */
  public get asyncScheduling(): boolean {
    return this.knobs.asyncScheduling;
  }

  /** The per-sequence CPU time of a step, seconds. */
  public get sequenceOverheadSeconds(): number {
    return this.knobs.sequenceOverheadSeconds;
  }

  /** The fixed cost of one KV transfer, where a published timing gives one. */
  public get kvTransferLatencySeconds(): number | undefined {
    return this.knobs.kvTransferLatencySeconds;
  }

  /** The share of the line rate a transfer reaches, where a published timing gives one. */
  public get kvTransferEfficiency(): number | undefined {
    return this.knobs.kvTransferEfficiency;
  }

  /** The pool fields this profile sets for a pool of `role` (merged into its `efficiency` and `hardware`). */
  public poolKnobs(role: 'both' | 'prefill' | 'decode', efficiency?: Record<string, unknown>, hardware?: Record<string, unknown>): Record<string, unknown> {
    const k = this.knobs;
    const ownEfficiency = {
      ...(k.sequenceOverheadSeconds > 0 ? { sequenceOverheadSeconds: k.sequenceOverheadSeconds } : {}),
      // The decode side pulls the KV: its pool times the transfer.
      ...(k.kvTransferEfficiency !== undefined && role === 'decode' ? { fabric: k.kvTransferEfficiency } : {}),
    };
    return {
      chunkedPrefill: k.chunkedPrefill,
      asyncScheduling: k.asyncScheduling,
      ...(role === 'decode' && k.firstTokenAt !== 'decode-step' ? { firstTokenAt: k.firstTokenAt } : {}),
      ...(Object.keys(ownEfficiency).length > 0 ? { efficiency: { ...(efficiency ?? {}), ...ownEfficiency } } : {}),
      // The decode side pulls the KV (vLLM's NIXL read); the transfer is timed on its pool.
      ...(k.kvTransferLatencySeconds !== undefined && hardware
        ? { hardware: { ...hardware, kvTransferLatencySeconds: k.kvTransferLatencySeconds } } : {}),
    };
  }

  /**
   * `config` with every pool (a simulation's `pools`, a planner's `tensorParallelOptions`) behaving as
   * this engine generation.
   */
  public applyTo<T extends EngineConfig>(config: T): T {
    const pools = config.pools?.map(p => ({
      ...p, ...this.poolKnobs((p.role ?? 'both') as 'both' | 'prefill' | 'decode', p.efficiency, p.hardware ?? config.hardware),
    }));
    const options = config.planner?.tensorParallelOptions?.map(o => ({
      ...o, ...this.poolKnobs((o.role ?? 'both') as 'both' | 'prefill' | 'decode', o.efficiency, o.hardware ?? config.hardware),
    }));
    return {
      ...config,
      ...(pools ? { pools } : {}),
      ...(options && config.planner ? { planner: { ...config.planner, tensorParallelOptions: options } } : {}),
    };
  }
}
