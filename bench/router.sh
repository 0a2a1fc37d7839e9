#!/usr/bin/env bash
# Proxy overhead of `disagg-engine router` against nginx, same run, same sim-workers.
# Two sim-workers (speed-up 1e6: a 4-token answer takes microseconds of model time) answer
# directly, through nginx (Debian nginx-light: round-robin upstream, keep-alive pool, buffering off,
# 2 worker processes) and through our router (default policy llm-d with its approximate prefix
# history, so it scores every request; 2 threads). bench/router-load.mjs sends the load:
# concurrency 1 for latency (non-streaming and streaming), concurrency 32 for maximum requests/s.
# Added latency = proxied p50 / p99 minus direct p50 / p99. Prints a markdown table with ratios to
# nginx. Builds nothing: run `npx projen engine` first (or ENGINE=path/to/disagg-engine).
# REQUESTS (2000) and RPS_REQUESTS (10000) size the runs; ROUTER_FLAGS adds router flags
# (e.g. "--upstream-keepalive 0": a new upstream connection per request, as before the pool).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-engine/build/disagg-engine}
[[ -x "$engine" ]] || { echo "missing $engine; build it with \`npx projen engine\`" >&2; exit 1; }
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x "$nginx_bin" ]] || { echo "missing nginx; install Debian's: apt-get install -y nginx-light" >&2; exit 1; }
requests=${REQUESTS:-2000}
rps_requests=${RPS_REQUESTS:-10000}
model=bench-model
tmp=$(mktemp -d /tmp/disagg-bench-router.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# Starts `disagg-engine ARGS` (in this shell, so that cleanup knows its pid) and sets `port` from
# its "listening on" line.
start() {
  local name=$1; shift
  "$engine" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  for _ in $(seq 200); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out" 2>/dev/null | head -1)
    [[ -n "$port" ]] && return
    sleep 0.05
  done
  echo "$name did not start: $(cat "$tmp/$name.err")" >&2
  exit 1
}

config=engine/examples/llama-3.3-70b-p5en.json
start w1 sim-worker --config "$config" --port 0 --model-name $model --speedup 1000000 --max-waiting 100000; w1=$port
start w2 sim-worker --config "$config" --port 0 --model-name $model --speedup 1000000 --max-waiting 100000; w2=$port
# shellcheck disable=SC2086  # ROUTER_FLAGS is a list of words
start router router --host 127.0.0.1 --port 0 --model-name $model --threads 2 ${ROUTER_FLAGS:-} \
  --endpoint "role=aggregated,url=http://127.0.0.1:$w1" --endpoint "role=aggregated,url=http://127.0.0.1:$w2"
router=$port

nginx_port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
mkdir -p "$tmp/nginx/logs"
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  upstream workers {
    server 127.0.0.1:$w1;
    server 127.0.0.1:$w2;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:$nginx_port;
    location / {
      proxy_pass http://workers;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
EOF
"$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$nginx_port/health" >/dev/null 2>&1 && break; sleep 0.05; done
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$router/ready" >/dev/null 2>&1 && break; sleep 0.05; done

load() { node bench/router-load.mjs --model $model "$@"; }
field() { node -e "console.log(JSON.parse(process.argv[1])['$2'])" "$1"; }
declare -A r
for target in direct nginx router; do
  case $target in
    direct) url=http://127.0.0.1:$w1 ;;
    nginx) url=http://127.0.0.1:$nginx_port ;;
    router) url=http://127.0.0.1:$router ;;
  esac
  r[$target,plain]=$(load --url "$url" --requests "$requests" --concurrency 1)
  r[$target,stream]=$(load --url "$url" --requests "$requests" --concurrency 1 --stream)
  r[$target,rps]=$(load --url "$url" --requests "$rps_requests" --concurrency 32)
  echo "$target: ${r[$target,plain]} ${r[$target,stream]} ${r[$target,rps]}" >&2
done

node - "${r[direct,plain]}" "${r[nginx,plain]}" "${r[router,plain]}" \
  "${r[direct,stream]}" "${r[nginx,stream]}" "${r[router,stream]}" \
  "${r[direct,rps]}" "${r[nginx,rps]}" "${r[router,rps]}" <<'EOF'
const [dp, np, rp, ds, ns, rs, dr, nr, rr] = process.argv.slice(2).map((s) => JSON.parse(s));
const f = (x) => x.toFixed(3);
const ratio = (a, b) => (b > 0 ? (a / b).toFixed(2) + 'x' : '-');
const added = (p, d, k) => Math.max(0, p[k] - d[k]);
const rows = [];
for (const [label, d, n, r] of [['non-streaming', dp, np, rp], ['streaming', ds, ns, rs]]) {
  for (const k of ['p50Ms', 'p99Ms']) {
    const an = added(n, d, k), ar = added(r, d, k);
    rows.push(`| added latency ${k.slice(0, 3)} ms, ${label} | ${f(d[k])} (total) | ${f(an)} | ${f(ar)} | ${ratio(ar, an)} |`);
  }
}
rows.push(`| max requests/s (concurrency 32, non-streaming) | ${dr.rps.toFixed(0)} | ${nr.rps.toFixed(0)} | ${rr.rps.toFixed(0)} | ${ratio(rr.rps, nr.rps)} |`);
const errors = [dp, np, rp, ds, ns, rs, dr, nr, rr].reduce((n, x) => n + x.errors, 0);
console.log('| metric | direct | nginx | router | router / nginx |');
console.log('|---|---:|---:|---:|---:|');
for (const row of rows) console.log(row);
console.log(`\nerrors: ${errors}; latency at concurrency 1, ${dp.requests} requests per cell; lower added latency and higher requests/s are better`);
EOF
