#!/usr/bin/env bash
# Issue 24's simulation goal: on a day-shaped load, the autoscaled deployment against the smallest
# static one meeting the SLO at the peak (GPU-hours saved >= 30%, goodput >= 0.99x), and a
# long-prompt surge (prefill should grow, decode not). Llama 3.3 70B (3.1 70B's architecture) on
# p5.48xlarge, FP8, TP4 pools; configurations: bench/autoscaling/{base-config.ts,configs.py}.
# Every run is `disagg-engine simulate --config` on the virtual clock (deterministic, seed 7); the
# two day runs take minutes each on a quiet core. Notes: bench/notes/autoscaling.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ENGINE:-engine/build/disagg-engine}
[[ -x "$bin" ]] || { echo "missing $bin; build it: cmake --build engine/build --target disagg-engine (or ENGINE=...)" >&2; exit 1; }
out=bench/out/autoscaling
mkdir -p "$out"
npx ts-node --transpile-only bench/autoscaling/base-config.ts > "$out/base.json"
python3 bench/autoscaling/configs.py "$out"
summary() {
  python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); sc = s.get('scaling', {})
pools = ', '.join(f"{p['name']} {p['gpuHours']:.1f} GPU-h peak {p['peakReplicas']} ups {p['scaleUps']} downs {p['scaleDowns']} lost {p['lostOnScaleDown']}" for p in sc.get('pools', []))
print(f"{sys.argv[1]}: good {s['goodRequests']}/{s['submitted']} ({s['goodputShare']:.4f}), rejected {s['rejected']}, "
      f"TTFT p99 {s['ttftSeconds']['p99']:.3f} s, TPOT p99 {s['tpotSeconds']['p99'] * 1000:.1f} ms; GPU-h {sc.get('gpuHours', 0):.1f} ({pools})")
PY
}
echo "## smallest static deployment meeting the SLO at the peak (40 req/s, 30 min)"
for c in 3-1 4-1 2-2 3-2 4-2; do "$bin" simulate --config "$out/peak-$c.json" > "$out/peak-$c.out"; summary "$out/peak-$c.out"; done
echo "## the day"
for c in day-static day-auto surge; do "$bin" simulate --config "$out/$c.json" > "$out/$c.out"; summary "$out/$c.out"; done
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f'{d}/day-static.out')); a = json.load(open(f'{d}/day-auto.out'))
saved = 1 - a['scaling']['gpuHours'] / s['scaling']['gpuHours']
ratio = a['goodRequests'] / s['goodRequests']
print(f"GPU-hours saved {saved:.1%} (goal >= 30%), goodput {ratio:.4f}x (goal >= 0.99x): {'met' if saved >= 0.3 and ratio >= 0.99 else 'NOT met'}")
PY
