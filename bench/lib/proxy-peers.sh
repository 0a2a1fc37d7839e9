# Shared by the router benchmarks (bench/router.sh, bench/router-instructions.sh, bench/router-ab.sh); sourced, not run.
# bench_begin makes the scratch directory `tmp` and the `pids` array; bench_cleanup kills every
# process started here, then removes `tmp`.

# Common start of a router benchmark, run from the repository root with `engine` (the build the
# sim-workers run) and `model` set: checks that each ENGINE... build and nginx exist (sets
# `nginx_bin`), makes `tmp` (/tmp/disagg-bench-NAME.XXXXXX), cleans up on exit, and starts two bench
# sim-workers, whose ports it puts in `w1` and `w2`.
bench_begin() {
  local name=$1 e
  shift
  for e in "$@"; do
    [[ -x "$e" ]] || { echo "missing $e; build it with \`npx projen engine\`" >&2; exit 1; }
  done
  nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
  [[ -x "$nginx_bin" ]] || { echo "missing nginx; install Debian's: apt-get install -y nginx-light" >&2; exit 1; }
  tmp=$(mktemp -d "/tmp/disagg-bench-$name.XXXXXX")
  pids=()
  trap bench_cleanup EXIT INT TERM
  bench_worker w1
  w1=$port
  bench_worker w2
  w2=$port
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}

# A free loopback TCP port (closed again before it is printed).
free_port() {
  node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# Starts COMMAND... in this shell (so that bench_cleanup knows its pid; `started_pid` is it) and
# sets `port` from its "listening on http://127.0.0.1:PORT" line, waiting up to 30 s (a process
# under Valgrind starts slowly).
bench_start() {
  local name=$1; shift
  # The output file exists before the first read: sed on a missing file fails, and under
  # `set -e -o pipefail` that ended the calling script without a word.
  : >"$tmp/$name.out"
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  started_pid=$!
  pids+=("$started_pid")
  for _ in $(seq 600); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out" 2>/dev/null | head -1)
    [[ -n "$port" ]] && return
    sleep 0.05
  done
  echo "$name did not start: $(cat "$tmp/$name.err")" >&2
  exit 1
}

# Starts a bench sim-worker (speed-up 1e6: a 4-token answer takes microseconds of model time) with
# ENGINE, serving MODEL; sets `port`.
bench_worker() {
  bench_start "$1" "$engine" sim-worker --config engine/examples/llama-3.3-70b-p5en.json --port 0 \
    --model-name "$model" --speedup 1000000 --max-waiting 100000
}

# Writes $tmp/nginx/nginx.conf: nginx on 127.0.0.1:LISTEN_PORT with WORKERS worker processes
# (1 = no master process either: one process, as Valgrind needs), round robin over the loopback
# UPSTREAM_PORTs with a keep-alive pool, HTTP/1.1 upstream, buffering off (streams relay as they
# arrive), no access log.
write_nginx_conf() {
  local listen=$1 workers=$2 p
  shift 2
  mkdir -p "$tmp/nginx/logs"
  {
    [[ $workers == 1 ]] && echo "master_process off;"
    echo "worker_processes $workers;"
    echo "pid $tmp/nginx/nginx.pid;"
    echo "error_log $tmp/nginx/logs/error.log warn;"
    echo "events { worker_connections 4096; }"
    echo "http {"
    echo "  access_log off;"
    echo "  client_body_temp_path $tmp/nginx/body;"
    echo "  proxy_temp_path $tmp/nginx/proxy;"
    echo "  upstream workers {"
    for p in "$@"; do echo "    server 127.0.0.1:$p;"; done
    echo "    keepalive 64;"
    echo "  }"
    echo "  server {"
    echo "    listen 127.0.0.1:$listen;"
    echo "    location / {"
    echo "      proxy_pass http://workers;"
    echo "      proxy_http_version 1.1;"
    echo "      proxy_set_header Connection \"\";"
    echo "      proxy_buffering off;"
    echo "    }"
    echo "  }"
    echo "}"
  } >"$tmp/nginx/nginx.conf"
}
