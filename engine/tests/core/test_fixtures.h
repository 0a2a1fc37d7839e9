// test_fixtures.h — the model, scheduler limits and simulator pools the core and sim tests share.
//
// One 8B-class dense model on one H100 (16 GB of weights, 128 KiB of KV per token, 989 TFLOP/s,
// 3.35 TB/s): small enough that steps take milliseconds, real enough that prefill is compute-bound
// and decode memory-bound. Header-only; tests include it by relative path.
#pragma once

#include <cstdint>

#include <gtest/gtest.h>

#include "disagg/cost_model.h"
#include "disagg/scheduler.h"
#include "disagg/simulator.h"
#include "disagg/workload.h"

namespace disagg::test {

/// The shared model's cost parameters; `step_overhead_seconds` as given.
inline CostModelParams model_params(double step_overhead_seconds = 0) {
  CostModelParams p;
  p.weight_bytes_per_rank = 16e9;
  p.kv_bytes_per_token = 131072;  // 2 MiB per 16-token block
  p.active_parameters = 8e9;
  p.layers = 32;
  p.hidden_size = 4096;
  p.peak_flops_per_second = 989e12;
  p.hbm_bytes_per_second = 3.35e12;
  p.fabric_bytes_per_second = 5e10;
  p.step_overhead_seconds = step_overhead_seconds;
  return p;
}

inline CostModel cost_model() {
  return *CostModel::create(model_params());
}

/// A model of round numbers, so that every expected value can be checked by hand: 1e9 weight bytes,
/// 1e5 KV bytes per token, 1e9 parameters, 10 layers of width 1000; 1e12 FLOP/s, 1e11 B/s of HBM and
/// a 1e10 B/s fabric with 1 ms latency, each at 0.5.
inline CostModelParams round_params() {
  CostModelParams p;
  p.weight_bytes_per_rank = 1e9;
  p.kv_bytes_per_token = 1e5;
  p.active_parameters = 1e9;
  p.layers = 10;
  p.hidden_size = 1000;
  p.peak_flops_per_second = 1e12;
  p.hbm_bytes_per_second = 1e11;
  p.fabric_bytes_per_second = 1e10;
  p.fabric_latency_seconds = 1e-3;
  p.compute_efficiency = 0.5;
  p.memory_efficiency = 0.5;
  p.fabric_efficiency = 0.5;
  return p;
}

/// Scheduler limits of a tiny worker: 4-token blocks, at most 64 waiting.
inline SchedulerConfig small_config(std::int32_t blocks, std::int32_t seqs, std::int32_t budget) {
  SchedulerConfig c;
  c.num_blocks = blocks;
  c.block_size = 4;
  c.max_num_seqs = seqs;
  c.max_num_batched_tokens = budget;
  c.max_waiting = 64;
  return c;
}

/// A simulator pool of the shared model (2 ms step overhead), 64 sequences and 2,048 tokens per step.
inline PoolSpec sim_pool(WorkerRole role, int replicas, int blocks) {
  PoolSpec p;
  p.role = role;
  p.replicas = replicas;
  p.cost = model_params(0.002);
  p.scheduler.num_blocks = blocks;
  p.scheduler.max_num_seqs = 64;
  p.scheduler.max_num_batched_tokens = 2048;
  return p;
}

/// Runs `w` on a simulator of `c`; a refused configuration or run fails the calling test.
inline SimulationResult run(const SimulationConfig& c, const WorkloadSpec& w) {
  auto sim = Simulator::create(c);
  EXPECT_TRUE(sim.has_value()) << (sim ? "" : sim.error().message);
  auto wl = Workload::create(w).value();
  auto r = sim->run(wl);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return *r;
}

}  // namespace disagg::test
