// disagg-sim-bench: simulated requests per second of wall time.
//
// The target: one hour of traffic at 100 requests/s (ISL 1k / OSL 256, 16 workers, prefix
// caching on) simulated in under 10 s on one core. The deployment: 16 aggregated replicas of a
// Llama-3.1-8B-class model in BF16 on one H100 each, routed by the llm-d weighted scorers over the
// event-fed KV block index. Prompts are 1,024 tokens: a 256-token system prompt of one of 16
// tenants (Zipf 1.0) plus 768 tokens of fresh text, so the prefix cache has something to hit.
//
// Flags: --seconds S (3600), --rate R (100), --workers N (16), --policy NAME (llm-d),
// --workload single|chat (single; chat: 4-turn sessions whose answers later turns reuse),
// --summary 1 (also print the run's summary JSON, to compare runs and builds bit for bit).
// Prints one markdown table row (header first).
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "disagg/simulator.h"
#include "disagg/workload.h"

int main(int argc, char** argv) {
  double seconds = 3600, rate = 100;
  int workers = 16;
  std::string policy = "llm-d";
  std::string kind = "single";
  bool summary = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rate")) rate = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workers")) workers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--policy")) policy = argv[i + 1];
    else if (!std::strcmp(argv[i], "--workload")) kind = argv[i + 1];
    else if (!std::strcmp(argv[i], "--summary")) summary = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(
          stderr,
          "disagg-sim-bench: unknown flag '%s'; use --seconds, --rate, --workers, --policy, --workload, --summary\n",
          argv[i]);
      return 2;
    }
  }
  if (kind != "single" && kind != "chat") {
    std::fprintf(stderr, "disagg-sim-bench: --workload '%s' must be single or chat\n", kind.c_str());
    return 2;
  }

  disagg::PoolSpec pool;
  pool.name = "workers";
  pool.role = disagg::WorkerRole::aggregated;
  pool.replicas = workers;
  // Llama-3.1-8B: 8.03e9 parameters, 32 layers, hidden 4096, 8 KV heads x 128 dims:
  // KV = 2 x 32 x 8 x 128 x 2 B = 131,072 B/token (model config.json; REFERENCE.md section 5 formula).
  pool.cost.weight_bytes_per_rank = 16.06e9;  // BF16, TP 1
  pool.cost.kv_bytes_per_token = 131072;
  pool.cost.active_parameters = 8.03e9;
  pool.cost.layers = 32;
  pool.cost.hidden_size = 4096;
  // H100 SXM: BF16 dense 989 TFLOP/s, HBM3 3.35 TB/s (REFERENCE.md section 1); p5.48xlarge
  // 3,200 Gb/s EFA over 8 GPUs = 400 Gb/s = 5e10 B/s per GPU.
  pool.cost.peak_flops_per_second = 989e12;
  pool.cost.hbm_bytes_per_second = 3.35e12;
  pool.cost.fabric_bytes_per_second = 5e10;
  pool.cost.step_overhead_seconds = 0.002;  // assumption: scheduling and launches per step
  pool.scheduler.max_num_seqs = 256;
  pool.scheduler.max_num_batched_tokens = 8192;
  // 80 GiB x 0.9 (vLLM gpu_memory_utilization) - 16.06 GB weights ~ 61 GB ~ 467k tokens; keep 400k.
  pool.scheduler.num_blocks = 400000 / 16;
  pool.scheduler.block_size = 16;

  disagg::SimulationConfig config;
  config.pools.push_back(pool);
  config.router.policy = policy;
  config.slo = {2.0, 0.1};

  disagg::WorkloadSpec spec;
  spec.kind = disagg::WorkloadKind::single;
  spec.seed = 42;
  spec.max_requests = 0;
  spec.duration_seconds = seconds;
  spec.arrival.rate_per_second = rate;
  spec.input = {disagg::LengthDist::Kind::fixed, 768, 0, 1, 1 << 20};
  spec.output = {disagg::LengthDist::Kind::fixed, 256, 0, 1, 1 << 20};
  spec.tenants = 16;
  spec.system_prompt_tokens = 256;
  spec.fresh_text = false;  // as `disagg simulate` and the planner run it: the simulator hashes shared prefixes only
  if (kind == "chat") {
    // Same tokens per second: sessions of 4 turns arrive at a quarter of the rate; follow-ups of
    // 256 new tokens after the previous prompt and answer.
    spec.kind = disagg::WorkloadKind::chat;
    spec.arrival.rate_per_second = rate / 4;
    spec.turns = {disagg::LengthDist::Kind::fixed, 4, 0, 1, 1000};
    spec.followup_input = {disagg::LengthDist::Kind::fixed, 256, 0, 1, 1 << 20};
    spec.think_time_seconds = 5;
  }

  auto sim = disagg::Simulator::create(config);
  if (!sim) {
    std::fprintf(stderr, "disagg-sim-bench: %s\n", sim.error().message.c_str());
    return 1;
  }
  auto workload = disagg::Workload::create(spec);
  if (!workload) {
    std::fprintf(stderr, "disagg-sim-bench: %s\n", workload.error().message.c_str());
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  auto result = sim->run(*workload);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // CPU time too: on a shared machine wall time also counts other processes' turns on the core.
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  if (!result) {
    std::fprintf(stderr, "disagg-sim-bench: %s\n", result.error().message.c_str());
    return 1;
  }
  const disagg::MetricsSummary& m = result->summary;
  std::printf(
      "| traffic | workers | policy | requests | events | steps | wall s | cpu s | simulated req/wall s | "
      "TTFT p50/p99 ms | TPOT p50/p99 ms | prefix hit | mean util |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf(
      "| %.0f s x %.0f req/s, %s | %d | %s | %lld | %lld | %lld | %.2f | %.2f | %.0f | "
      "%.1f / %.1f | %.1f / %.1f | %.3f | %.3f |\n",
      seconds, rate, kind == "chat" ? "chat, 4 turns" : "ISL 1k / OSL 256", workers, policy.c_str(),
      static_cast<long long>(m.completed), static_cast<long long>(result->events),
      static_cast<long long>(result->steps), wall, cpu, static_cast<double>(m.completed) / wall, m.ttft.p50 * 1e3,
      m.ttft.p99 * 1e3, m.tpot.p50 * 1e3, m.tpot.p99 * 1e3, m.prefix_hit_rate[0], m.mean_utilization);
  if (summary) std::printf("%s\n", disagg::to_json(m).c_str());
  return 0;
}
