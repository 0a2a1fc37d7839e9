// drain_wait.cc — `disagg-engine drain-wait` (drain_wait.h).
#include "drain_wait.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <thread>

#include "router_config.h"
#include "router_metrics.h"

namespace disagg::router {

namespace {

constexpr const char* kUsage =
    "usage: disagg-engine drain-wait --metrics-url http://HOST:PORT/metrics --timeout-s N [--quiet-s 2] [--poll-s "
    "0.5]\n"
    "                                [--held-kv]\n"
    "Waits until the worker has no request in flight, for a Kubernetes preStop hook: returns once\n"
    "vllm:num_requests_running + vllm:num_requests_waiting (+ disagg:sim_worker_pending_kv_transfers)\n"
    "read 0 for --quiet-s seconds, once the worker no longer listens, or after --timeout-s; says which.\n"
    "--held-kv (prefill pods): also wait while vllm:kv_cache_usage_perc > 0 with no request running or\n"
    "waiting (a finished prompt's KV blocks held until the decode pod has read them).\n"
    "Exit status 0 in all three, 2 for bad flags.\n";

bool parse_seconds(const std::string& v, double lo, double* out) {
  double d = 0;
  const auto res = std::from_chars(v.data(), v.data() + v.size(), d);
  if (res.ec != std::errc() || res.ptr != v.data() + v.size() || !std::isfinite(d) || d < lo) return false;
  *out = d;
  return true;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

}  // namespace

Expected<DrainWaitOptions, std::string> parse_drain_wait_args(int argc, char** argv, bool* help) {
  DrainWaitOptions o;
  bool have_url = false, have_timeout = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      *help = true;
      return o;
    }
    if (flag == "--held-kv") {
      o.held_kv = true;
      continue;
    }
    if (i + 1 >= argc) return unexpected("'" + flag + "' needs a value; see --help");
    const std::string v = argv[++i];
    if (flag == "--metrics-url") {
      auto hp = parse_http_url(v);
      if (!hp) return unexpected("'--metrics-url' (" + v + ") " + hp.error());
      o.host = hp->first;
      o.port = hp->second;
      const std::string rest = v.substr(std::strlen("http://"));
      const auto slash = rest.find('/');
      o.path = slash == std::string::npos ? "/metrics" : rest.substr(slash);
      have_url = true;
    } else if (flag == "--timeout-s") {
      if (!parse_seconds(v, 0, &o.timeout_s)) {
        return unexpected("'--timeout-s' (" + v +
                          ") must be a number of seconds >= 0, e.g. the pod's grace period minus its preStop sleep");
      }
      have_timeout = true;
    } else if (flag == "--quiet-s") {
      if (!parse_seconds(v, 0, &o.quiet_s))
        return unexpected("'--quiet-s' (" + v + ") must be a number of seconds >= 0, e.g. 2");
    } else if (flag == "--poll-s") {
      if (!parse_seconds(v, 0.01, &o.poll_s))
        return unexpected("'--poll-s' (" + v + ") must be a number of seconds >= 0.01, e.g. 0.5");
    } else {
      return unexpected("unknown flag '" + flag +
                        "'; drain-wait takes --metrics-url, --timeout-s, --quiet-s, --poll-s and --held-kv");
    }
  }
  if (!have_url)
    return unexpected(std::string("'--metrics-url' is required, e.g. --metrics-url http://127.0.0.1:8000/metrics"));
  if (!have_timeout) return unexpected(std::string("'--timeout-s' is required, e.g. --timeout-s 120"));
  return o;
}

std::optional<double> busy_requests(std::string_view text, bool held_kv, bool* held_kv_only) {
  const ScrapedLoad load = parse_vllm_load(text);
  if (held_kv_only != nullptr) *held_kv_only = false;
  if (!load.found) return std::nullopt;
  const double requests = load.running + load.waiting + load.pending_transfers;
  if (held_kv && requests == 0 && load.kv_usage > 0) {
    if (held_kv_only != nullptr) *held_kv_only = true;
    return 1;
  }
  return requests;
}

DrainReading read_worker(const DrainWaitOptions& o) {
  DrainReading r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(o.host.c_str(), std::to_string(o.port).c_str(), &hints, &res) != 0) return r;
  const int timeout_ms = static_cast<int>((o.poll_s + 1) * 1000);
  int fd = -1;
  bool refused = false;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
        rc = -1;
        errno = err;
      }
    }
    if (rc != 0) {
      refused = refused || errno == ECONNREFUSED;
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    r.gone = refused;
    return r;
  }
  const std::string request = "GET " + o.path + " HTTP/1.0\r\nHost: " + o.host + "\r\nAccept: text/plain\r\n\r\n";
  std::string response;
  bool ok = true;
  for (std::size_t sent = 0; ok && sent < request.size();) {
    pollfd p{fd, POLLOUT, 0};
    const ssize_t n =
        ::poll(&p, 1, timeout_ms) == 1 ? ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL) : -1;
    if (n <= 0) ok = false;
    else sent += static_cast<std::size_t>(n);
  }
  char buf[16384];
  while (ok && response.size() < (16u << 20)) {  // a vLLM page is tens of KiB
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) {
      ok = false;
      break;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) ok = false;
    if (n <= 0) break;
    response.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // HTTP/1.x 200, then the body after the blank line (HTTP/1.0: no chunked encoding).
  const auto body_at = response.find("\r\n\r\n");
  if (!ok || body_at == std::string::npos || response.compare(0, 5, "HTTP/") != 0) return r;
  const auto sp = response.find(' ');
  if (sp == std::string::npos || response.compare(sp + 1, 3, "200") != 0) return r;
  r.busy = busy_requests(std::string_view(response).substr(body_at + 4), o.held_kv, &r.held_kv_only);
  return r;
}

DrainWaitEnd drain_wait(const DrainWaitOptions& o, const std::function<DrainReading()>& read,
                        const std::function<void(const std::string&)>& say) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));
  // Not an optional<time_point>: g++ 12 warns that one may be read uninitialized (a false positive).
  bool quiet = false;
  Clock::time_point quiet_since{};
  std::optional<double> last_busy;
  bool last_held_kv_only = false;
  bool said_unreadable = false;
  while (true) {
    const DrainReading r = read();
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if (r.gone) {
      say("the worker no longer listens after " + format_seconds(elapsed) + " s: nothing left to wait for");
      return DrainWaitEnd::gone;
    }
    if (!r.busy) {
      quiet = false;
      if (!said_unreadable) say("cannot read the worker's request gauges; counting it busy");
      said_unreadable = true;
    } else {
      said_unreadable = false;
      if (!last_busy || *last_busy != *r.busy || last_held_kv_only != r.held_kv_only) {
        say(format_seconds(elapsed) + " s: " +
            (r.held_kv_only ? std::string("no request, KV blocks held for a transfer")
                            : std::to_string(static_cast<long long>(*r.busy)) + " requests in flight"));
      }
      last_busy = r.busy;
      last_held_kv_only = r.held_kv_only;
      if (*r.busy > 0) {
        quiet = false;
      } else if (!quiet) {
        quiet = true;
        quiet_since = now;
      }
      if (quiet && std::chrono::duration<double>(now - quiet_since).count() >= o.quiet_s) {
        say("idle for " + format_seconds(o.quiet_s) + " s after " + format_seconds(elapsed) + " s: drained");
        return DrainWaitEnd::quiet;
      }
    }
    if (now >= deadline) {
      say("timed out after " + format_seconds(o.timeout_s) + " s with " +
          (last_busy && r.busy ? std::to_string(static_cast<long long>(*last_busy))
                               : std::string("an unknown number of")) +
          " requests in flight");
      return DrainWaitEnd::timed_out;
    }
    const auto next =
        std::min(deadline, now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.poll_s)));
    std::this_thread::sleep_until(next);
  }
}

int run_drain_wait(int argc, char** argv) {
  bool help = false;
  auto o = parse_drain_wait_args(argc, argv, &help);
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  if (!o) {
    std::cerr << "disagg-engine drain-wait: " << o.error() << "\n";
    return 2;
  }
  drain_wait(
      *o, [&] { return read_worker(*o); },
      [](const std::string& line) { std::cout << "disagg-engine drain-wait: " << line << std::endl; });
  return 0;
}

}  // namespace disagg::router
