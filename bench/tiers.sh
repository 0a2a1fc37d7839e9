#!/usr/bin/env bash
# Tiered KV in simulation (issue 5: "optional lower tiers (host, disk, remote) with their
# bandwidths", "prefix-cache hit rate per tier"). The chat workload of bench/policy-quality.sh on
# its deployment (8 aggregated replicas of Llama-3.3-70B FP8, BF16 KV, TP 2 on p5en.48xlarge), but
# with the GPU KV cache cut to KV_TOKENS (100,000) tokens per replica so that chat history falls out
# of HBM between turns; then the same run with lower tiers added one by one:
#   none | host | host + disk | host + disk + remote.
# Deterministic (fixed seed; `disagg-engine simulate` runs on a virtual clock). Prints a markdown
# table: hit rate per tier, TTFT p50/p90, throughput, bytes loaded and offloaded, skipped offloads.
#
# Assumed tier numbers (per TP-2 replica; p5en.48xlarge holds 4 such replicas):
#   host    HOST_GIB (32) GiB of the instance's 2,048 GiB RAM (REFERENCE.md section 1), a modest
#           offload size so that the disk tier has misses to catch; read/write 1e11 B/s:
#           a replica's KV is sharded over its 2 GPUs, each with its own PCIe Gen5 x16 link
#           (~64 GB/s per direction nominal; ~50 GB/s assumed reachable); 10 us per transfer.
#   disk    2 TB of the replica's 2 x 3,800 GB instance-store NVMe (REFERENCE.md section 1);
#           read 1e10 B/s, write 5e9 B/s (assumed ~5 GB/s read and ~2.5 GB/s write per drive; NVMe
#           tier figures of ~7 GB/s and ~100 us are quoted for Gen5 drives); 100 us per transfer.
#   remote  one 10 TB store shared by all replicas (disagg-engine kvstore, Redis protocol over TCP,
#           so ENA rather than EFA): 1.25e10 B/s per replica (assumed 100 Gb/s share), 500 us.
# POLICY (disagg), REQUESTS (4000), RATE_CHAT (8 sessions/s), KV_TOKENS and HOST_GIB override.
# Builds nothing: run `cmake --build engine/build --target disagg-engine` first (ENGINE overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
[[ -x "$engine" ]] || { echo "missing $engine; build it: cmake --build engine/build --target disagg-engine" >&2; exit 1; }
tmp=$(mktemp -d /tmp/disagg-tiers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# config TIERS > file, TIERS one of none, host, host+disk, host+disk+remote.
config() {
  TIERS=$1 POLICY=${POLICY:-disagg} REQUESTS=${REQUESTS:-4000} RATE_CHAT=${RATE_CHAT:-8} KV_TOKENS=${KV_TOKENS:-100000} HOST_GIB=${HOST_GIB:-32} node -e '
    const e = process.env;
    const GiB = 2 ** 30;
    const all = {
      host: { tier: "host", capacityBytes: +e.HOST_GIB * GiB, readBytesPerSecond: 1e11, writeBytesPerSecond: 1e11, latencySeconds: 1e-5 },
      disk: { tier: "disk", capacityBytes: 2e12, readBytesPerSecond: 1e10, writeBytesPerSecond: 5e9, latencySeconds: 1e-4 },
      remote: { tier: "remote", capacityBytes: 1e13, readBytesPerSecond: 1.25e10, writeBytesPerSecond: 1.25e10, latencySeconds: 5e-4 },
    };
    const kvTiers = e.TIERS === "none" ? [] : e.TIERS.split("+").map((t) => all[t]);
    process.stdout.write(JSON.stringify({
      model: { name: "llama-3.3-70b", weightBytesPerRank: 2 * 17638426624, kvBytesPerToken: 327680,
               activeParameters: 70553706496, layers: 80, hiddenSize: 8192, attentionWidth: 8192, activationBytes: 2 },
      hardware: { peakFlopsPerSecond: 1.979e15, hbmBytesPerSecond: 4.8e12, interconnectBytesPerSecond: 4.5e11,
                  interconnectLatencySeconds: 8e-6, fabricBytesPerSecond: 2e11, fabricLatencySeconds: 3e-5 },
      parallel: { tensorParallel: 2 },
      efficiency: { compute: 0.5, memory: 0.7, interconnect: 0.7, fabric: 0.7, stepOverheadSeconds: 0.003 },
      router: { servedModelName: "llama-3.3-70b", kvBlockSize: 16 },
      policy: { name: e.POLICY },
      pools: [{ name: "serve", role: "both", replicas: 8, kvTokensPerReplica: +e.KV_TOKENS,
                maxBatchedTokens: 8192, maxConcurrencyPerReplica: 256, kvTiers }],
      workload: {
        kind: "chat", requests: +e.REQUESTS,
        arrival: { process: "gamma", ratePerSecond: +e.RATE_CHAT, cv: 2 },
        inputTokens: { distribution: "lognormal", mean: 2000, stddev: 1000, min: 16, max: 16000 },
        outputTokens: { distribution: "lognormal", mean: 250, stddev: 100, min: 1, max: 2000 },
        tenants: { count: 16, systemPromptTokens: 1024, zipfExponent: 1.0 },
        chat: { turns: { distribution: "uniform", min: 1, max: 8 }, thinkTimeSeconds: 10 },
      },
      slo: { ttftSeconds: 2, tpotSeconds: 0.05 },
      seed: 7,
    }));'
}

echo "| tiers | hit gpu | hit host | hit disk | hit remote | hit total | TTFT p50 (s) | TTFT p90 (s) | throughput (req/s) | goodput (req/s) | GB loaded h/d/r | GB offloaded h/d/r | offloads skipped | preemptions |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|"
for tiers in none host host+disk host+disk+remote; do
  config "$tiers" > "$tmp/$tiers.json"
  "$engine" simulate --config "$tmp/$tiers.json" | tail -n 1 > "$tmp/$tiers.out"
  TIERS=$tiers node -e '
    const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const h = r.prefixHitRate, pct = (x) => (x * 100).toFixed(1) + "%";
    const t = r.kvTiers || { host: {}, disk: {}, remote: {} };
    const gb = (k) => ["host", "disk", "remote"].map((n) => ((t[n][k] || 0) / 1e9).toFixed(0)).join(" / ");
    const skipped = ["host", "disk", "remote"].reduce((s, n) => s + (t[n].offloadsSkipped || 0), 0);
    console.log(`| ${process.env.TIERS} | ${pct(h.gpu)} | ${pct(h.host)} | ${pct(h.disk)} | ${pct(h.remote)} | ` +
      `${pct(h.gpu + h.host + h.disk + h.remote)} | ${r.ttftSeconds.p50.toFixed(3)} | ${r.ttftSeconds.p90.toFixed(3)} | ` +
      `${r.requestsPerSecond.toFixed(2)} | ${r.goodputRequestsPerSecond.toFixed(2)} | ${gb("bytesLoaded")} | ` +
      `${gb("bytesOffloaded")} | ${skipped} | ${r.preemptions} |`);' < "$tmp/$tiers.out"
done
