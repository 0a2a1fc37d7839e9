#!/usr/bin/env bash
# Time to synthesize the example CDK app (examples/cdk-app: cluster, add-ons, P5en and Trn2 node
# groups, cdk-nag checks) against a hand-written plain aws-eks-v2 stack, both through the real CDK CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
export CDK_DISABLE_CLI_TELEMETRY=true
runs=${RUNS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

time_ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

ours=(); peer=()
for _ in $(seq "$runs"); do
  ours+=("$(cd examples/cdk-app && time_ms npx cdk synth --no-notices -q -o "$out/ours")")
  peer+=("$(time_ms npx cdk synth --no-notices -q -o "$out/peer" --app 'npx ts-node --transpile-only bench/peers/plain-eks-app.ts')")
done
o=$(printf '%s\n' "${ours[@]}" | median); p=$(printf '%s\n' "${peer[@]}" | median)
resources=$(node -e "const t=require('$out/ours/DisaggInference.template.json');console.log(Object.keys(t.Resources).length)")
echo "| stack | resources | synth median of $runs (ms) | ratio to peer |"
echo "|---|---|---|---|"
echo "| examples/cdk-app (disagg) | $resources | $o | $(node -e "console.log(($o/$p).toFixed(2))") |"
echo "| plain aws-eks-v2 cluster + node group (peer) | $(node -e "console.log(Object.keys(require('$out/peer/PlainEks.template.json').Resources).length)") | $p | 1.00 |"
