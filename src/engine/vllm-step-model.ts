// The time model of a vLLM engine step, as the simulator and the planner price it: the roofline of
// disagg/cost_model.h (max(compute, memory) + all-reduces) plus the fixed costs a roofline misses.
// Few constants, the same for every model and run: a per-accelerator memory efficiency (the catalog's
// Accelerator.decodeMemoryEfficiency) and the engine's own times below. Where each number comes from:
//   - computeEfficiency 0.6: BF16 prefills of 1k-16k tokens reached 62% of peak on one H200
//     (bench/notes/cost-model-h200.md). The validation runs hit the prefix cache and barely test it.
//   - layerOverheadSeconds, stepOverheadSeconds, requestOverheadSeconds and the memory efficiencies:
//     fitted together on 13 of the 19 real vLLM 0.15.1 runs of ../shared/validation and checked on
//     the other 6 (bench/validation.sh prints both; bench/notes/validation.md has the search).
//     40 us per layer is the small kernels' share (norms, rotary, activation, each kernel's ramp):
//     bench/gpu's H200 decode step at batch 1 spends 1.0 ms beyond its weight reads at 85% of peak
//     bandwidth, 30 us per layer. 8 ms per request is the API server's part of TTFT (the runs'
//     README: roughly 15 ms, which included the engine's wait for the step in flight).
// vLLM's async scheduling (on by default since 0.14) is the pool's `asyncScheduling`, not a time.
import type { Accelerator } from '../catalog';
import type { EngineEfficiencyConfig } from './engine-config';

/** The engine-wide constants of the step model (see the file comment for their sources). */
export const VLLM_STEP_MODEL = {
  /** Fraction of peak FLOP/s a prefill reaches. */
  computeEfficiency: 0.6,
  /** Fraction of memory bandwidth a decode step reaches on a device the catalog does not calibrate. */
  defaultMemoryEfficiency: 0.7,
  /** Fixed seconds per layer of every step. */
  layerOverheadSeconds: 4e-5,
  /** Fixed seconds per step (what async scheduling leaves of the scheduler's time). */
  stepOverheadSeconds: 5e-4,
  /** Seconds of API-server time per request (HTTP, tokenization, hand-off, streaming). */
  requestOverheadSeconds: 8e-3,
} as const;

/**
 * The efficiency section of a vLLM replica on `accelerator`: the step model's constants, with the
 * accelerator's calibrated memory efficiency. `overrides` win key by key.
 */
export function vllmEfficiency(accelerator: Accelerator, overrides?: EngineEfficiencyConfig): EngineEfficiencyConfig {
  return {
    compute: VLLM_STEP_MODEL.computeEfficiency,
    memory: accelerator.decodeMemoryEfficiency ?? VLLM_STEP_MODEL.defaultMemoryEfficiency,
    layerOverheadSeconds: VLLM_STEP_MODEL.layerOverheadSeconds,
    stepOverheadSeconds: VLLM_STEP_MODEL.stepOverheadSeconds,
    requestOverheadSeconds: VLLM_STEP_MODEL.requestOverheadSeconds,
    ...overrides,
  };
}
