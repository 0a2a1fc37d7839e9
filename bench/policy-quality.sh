#!/usr/bin/env bash
# Policy quality (issue 6, Benchmark): the same deployment under two workloads, once per routing
# policy, on `disagg-engine simulate`'s virtual clock (deterministic: fixed seed). Prints a markdown
# table of TTFT p90, TPOT p90, goodput (requests/s meeting the SLO) and GPU prefix hit rate.
# Deployment: 8 aggregated replicas (role "both") of Llama-3.3-70B, FP8 weights, BF16 KV, TP 2 on
# p5en.48xlarge (H200). Model and hardware numbers are those of engine/examples/llama-3.3-70b-p5en.json
# (sources cited there); weightBytesPerRank is its TP4 figure x 2 for TP2, and kvTokensPerReplica is
# half the 1,000,000 tokens the P/D example gives a TP4 replica.
# Workloads, each at a rate near saturation of the 8 replicas (round robin already misses the SLO;
# RATE_PREFIX (32 req/s) and RATE_CHAT (8 sessions/s) override):
#   prefix: 32 tenants with 4,096-token system prompts (Zipf 1.0), 1k-token user input, 256 out.
#   chat:   16 tenants with 1,024-token system prompts, 1-8 turns, 10 s think time (as the P/D example).
# SLO: TTFT <= 2 s and TPOT <= 50 ms. POLICIES overrides the policies (first = ours, default disagg).
# Builds nothing: run `cmake --build engine/build --target disagg-engine` first.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
[[ -x "$engine" ]] || { echo "missing $engine; build it: cmake --build engine/build --target disagg-engine" >&2; exit 1; }
policies=${POLICIES:-disagg round-robin llm-d sglang}
requests=${REQUESTS:-4000}
tmp=$(mktemp -d /tmp/disagg-policy-quality.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# config WORKLOAD POLICY > file: the shared deployment plus one workload.
config() {
  WORKLOAD=$1 POLICY=$2 REQUESTS=$requests RATE_PREFIX=${RATE_PREFIX:-} RATE_CHAT=${RATE_CHAT:-} node -e '
    const e = process.env;
    const workloads = {
      prefix: {
        kind: "single", requests: +e.REQUESTS,
        arrival: { process: "poisson", ratePerSecond: +(e.RATE_PREFIX || 32) },
        inputTokens: { distribution: "lognormal", mean: 1024, stddev: 512, min: 16, max: 8192 },
        outputTokens: { distribution: "lognormal", mean: 256, stddev: 128, min: 1, max: 2048 },
        tenants: { count: 32, systemPromptTokens: 4096, zipfExponent: 1.0 },
      },
      chat: {
        kind: "chat", requests: +e.REQUESTS,
        arrival: { process: "gamma", ratePerSecond: +(e.RATE_CHAT || 8), cv: 2 },
        inputTokens: { distribution: "lognormal", mean: 2000, stddev: 1000, min: 16, max: 16000 },
        outputTokens: { distribution: "lognormal", mean: 250, stddev: 100, min: 1, max: 2000 },
        tenants: { count: 16, systemPromptTokens: 1024, zipfExponent: 1.0 },
        chat: { turns: { distribution: "uniform", min: 1, max: 8 }, thinkTimeSeconds: 10 },
      },
    };
    process.stdout.write(JSON.stringify({
      model: { name: "llama-3.3-70b", weightBytesPerRank: 2 * 17638426624, kvBytesPerToken: 327680,
               activeParameters: 70553706496, layers: 80, hiddenSize: 8192, attentionWidth: 8192, activationBytes: 2 },
      hardware: { peakFlopsPerSecond: 1.979e15, hbmBytesPerSecond: 4.8e12, interconnectBytesPerSecond: 4.5e11,
                  interconnectLatencySeconds: 8e-6, fabricBytesPerSecond: 2e11, fabricLatencySeconds: 3e-5 },
      parallel: { tensorParallel: 2 },
      efficiency: { compute: 0.5, memory: 0.7, interconnect: 0.7, fabric: 0.7, stepOverheadSeconds: 0.003 },
      router: { servedModelName: "llama-3.3-70b", kvBlockSize: 16 },
      policy: { name: e.POLICY },
      pools: [{ name: "serve", role: "both", replicas: 8, kvTokensPerReplica: 500000,
                maxBatchedTokens: 8192, maxConcurrencyPerReplica: 256 }],
      workload: workloads[e.WORKLOAD],
      slo: { ttftSeconds: 2, tpotSeconds: 0.05 },
      seed: 7,
    }));'
}

echo "| workload | policy | TTFT p90 (s) | TPOT p90 (ms) | goodput (req/s) | throughput (req/s) | prefix hit rate |"
echo "|---|---|---:|---:|---:|---:|---:|"
for workload in prefix chat; do
  for policy in $policies; do
    config "$workload" "$policy" > "$tmp/$workload-$policy.json"
    "$engine" simulate --config "$tmp/$workload-$policy.json" | tail -n 1 > "$tmp/$workload-$policy.out"
    WORKLOAD=$workload POLICY=$policy node -e '
      const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const hit = r.prefixHitRate.gpu + r.prefixHitRate.host + r.prefixHitRate.disk + r.prefixHitRate.remote;
      console.log(`| ${process.env.WORKLOAD} | ${process.env.POLICY} | ${r.ttftSeconds.p90.toFixed(3)} | ` +
        `${(r.tpotSeconds.p90 * 1000).toFixed(1)} | ${r.goodputRequestsPerSecond.toFixed(2)} | ` +
        `${r.requestsPerSecond.toFixed(2)} | ${(hit * 100).toFixed(1)}% |`);' < "$tmp/$workload-$policy.out"
  done
done
