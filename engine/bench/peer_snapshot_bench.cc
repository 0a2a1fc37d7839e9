// peer_snapshot_bench.cc — `disagg-peer-snapshot-bench`: the cost of a peer snapshot at its bound
// (router.peers.maxBlocks, 2,000,000 blocks), phase by phase, as two routers pay it. Prints
// markdown rows (bench/notes/peer-snapshot-limit.md). Not a test.
//
//   disagg-peer-snapshot-bench [--blocks N] [--endpoints E] [--keys K] [--runs R] [--timeout-ms T]
//   (defaults 2,000,000 blocks over 8 endpoints, K = 1 router key per block (vLLM and router both at
//   16 tokens; K = 4 is vLLM's 64-token blocks keyed at 16), 3 runs, the router's 2,000 ms peer timeout)
//
// Phases, each timed alone and then end to end:
//   build     the serving router's EndpointTable::snapshot() (it holds the routing lock meanwhile)
//   encode    encode_peer_snapshot()
//   decode    decode_peer_snapshot() in the loading router
//   load      set_peer_snapshot() + adding every endpoint (keyers and index filled under the lock)
//   fetch     a real GET /snapshot over loopback: the listener builds and encodes (as a router
//             does), sends; fetch_peer_snapshot() reads and decodes. transfer = fetch - build -
//             encode - decode
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "endpoint_table.h"
#include "peer_link.h"
#include "peer_snapshot.h"

namespace {

using namespace disagg;
using namespace disagg::router;
using BenchClock = std::chrono::steady_clock;

double ms_since(BenchClock::time_point t) {
  return std::chrono::duration<double, std::milli>(BenchClock::now() - t).count();
}

struct Options {
  std::size_t blocks = 2'000'000;
  int endpoints = 8;
  int keys = 1;
  int runs = 3;
  std::int64_t timeout_ms = 2'000;
};

std::unique_ptr<EndpointTable> make_table(RouterMetrics& metrics, std::size_t blocks, int keys) {
  RouterConfig rc;
  rc.precise_prefix = true;
  rc.block_size = 16;
  // Room for every block in the index and in each endpoint's keyer (sized by the per-endpoint cap).
  const std::size_t entries = blocks * static_cast<std::size_t>(keys);
  rc.index_entries = static_cast<std::int64_t>(std::max<std::size_t>(entries + entries / 4, std::size_t{1} << 22));
  rc.index_entries_per_endpoint = static_cast<std::int64_t>(entries);
  auto t = EndpointTable::create(rc, metrics);
  if (!t) {
    std::fprintf(stderr, "%s\n", t.error().c_str());
    std::exit(1);
  }
  return std::move(*t);
}

EndpointSpec worker(int i) {
  EndpointSpec e;
  e.pool = "workers";
  e.host = "10.0.0." + std::to_string(i + 1);
  e.port = 8000;
  e.kv_events = "tcp://" + e.host + ":5557";
  return e;
}

// Fills `table` with `blocks` blocks over the endpoints: chains of 64 publisher blocks, each of
// 16 x keys tokens, distinct per endpoint and chain.
void fill(EndpointTable& table, const Options& o, std::vector<int>& ids) {
  constexpr std::uint32_t kChain = 64;
  const std::size_t per_endpoint = o.blocks / static_cast<std::size_t>(o.endpoints);
  KvEventBatch b;
  for (int e = 0; e < o.endpoints; ++e) {
    const int id = table.add(worker(e), false, "");
    ids.push_back(id);
    const std::uint32_t gen = table.slot(id).generation;
    std::int64_t seq = 0;
    for (std::size_t done = 0; done < per_endpoint; done += kChain) {
      const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(kChain, per_endpoint - done));
      b.clear();
      b.seq = seq++;
      KvEventRecord r;
      r.block_size = 16 * o.keys;
      r.hash_count = n;
      r.token_count = n * static_cast<std::uint32_t>(r.block_size);
      const std::uint64_t base = (static_cast<std::uint64_t>(e) << 40) | (done << 4);
      for (std::uint32_t i = 0; i < n; ++i) b.hashes.push_back(base + i + 1);
      for (std::uint32_t t = 0; t < r.token_count; ++t) {
        b.tokens.push_back(static_cast<TokenId>((base * 31 + t) & 0x7fffffff));
      }
      b.events.push_back(r);
      table.on_kv_batch(static_cast<EndpointId>(id), gen, b);
    }
  }
}

struct Run {
  double build = 0, encode = 0, decode = 0, load = 0, fetch = 0;
  std::size_t bytes = 0, blocks = 0, loaded = 0;
  bool fetched = false;
  std::string fetch_error;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (f == "--blocks") o.blocks = static_cast<std::size_t>(v);
    else if (f == "--endpoints") o.endpoints = static_cast<int>(v);
    else if (f == "--keys") o.keys = static_cast<int>(v);
    else if (f == "--runs") o.runs = static_cast<int>(v);
    else if (f == "--timeout-ms") o.timeout_ms = v;
    else {
      std::fprintf(stderr, "unknown flag %s; see the comment at the top of engine/bench/peer_snapshot_bench.cc\n",
                   f.c_str());
      return 2;
    }
  }
  if (o.endpoints < 1 || o.endpoints > 64 || o.keys < 1 || o.keys > 8 || o.runs < 1 || o.blocks < 64) {
    std::fprintf(stderr, "--endpoints 1..64, --keys 1..8, --runs >= 1, --blocks >= 64\n");
    return 2;
  }
  PeerSnapshotLimits limits;  // as Router::create() sizes them
  limits.max_blocks = o.blocks;
  limits.max_bytes =
      64 + o.blocks * (2 + 8 + 8 * kPeerSnapshotMaxKeysPerBlock) + kMaxRoutingEndpoints * (kPeerSnapshotMaxLabel + 32);

  RouterMetrics serving_metrics;
  auto serving = make_table(serving_metrics, o.blocks, o.keys);
  std::vector<int> ids;
  const auto t_fill = BenchClock::now();
  fill(*serving, o, ids);
  std::fprintf(stderr, "filled %zu blocks over %d endpoints in %.0f ms\n", o.blocks, o.endpoints, ms_since(t_fill));

  auto server = PeerSnapshotServer::create("127.0.0.1", 0, o.timeout_ms, [&](const std::vector<std::string>& only) {
    PeerSnapshot snap;
    serving->snapshot(snap, o.blocks, only.empty() ? nullptr : &only);
    snap.instance = 1;
    return encode_peer_snapshot(snap);
  });
  if (!server) {
    std::fprintf(stderr, "%s\n", server.error().c_str());
    return 1;
  }
  (*server)->start();

  std::vector<Run> runs;
  for (int r = 0; r < o.runs; ++r) {
    Run run;
    PeerSnapshot snap;
    auto t = BenchClock::now();
    serving->snapshot(snap, o.blocks);
    run.build = ms_since(t);
    snap.instance = 1;
    run.blocks = snap.block_count();
    t = BenchClock::now();
    const std::string bytes = encode_peer_snapshot(snap);
    run.encode = ms_since(t);
    run.bytes = bytes.size();
    PeerSnapshot back;
    t = BenchClock::now();
    if (!decode_peer_snapshot(bytes, back, limits)) {
      std::fprintf(stderr, "the snapshot does not decode\n");
      return 1;
    }
    run.decode = ms_since(t);
    RouterMetrics loading_metrics;
    auto loading = make_table(loading_metrics, o.blocks, o.keys);
    t = BenchClock::now();
    loading->set_peer_snapshot(std::move(back));
    for (int e = 0; e < o.endpoints; ++e) loading->add(worker(e), false, "");
    run.load = ms_since(t);
    run.loaded = loading_metrics.kv_warm_peer_blocks.load();
    // The listener caches a whole snapshot for a second: wait that out, so each fetch builds one.
    std::this_thread::sleep_for(std::chrono::milliseconds(1'100));
    t = BenchClock::now();
    auto fetched = fetch_peer_snapshot("127.0.0.1", (*server)->port(), /*own_instance=*/2, o.timeout_ms, limits);
    run.fetch = ms_since(t);
    run.fetched = fetched.has_value() && fetched->block_count() == run.blocks;
    if (!fetched) run.fetch_error = fetched.error();
    runs.push_back(run);
    std::fprintf(stderr, "run %d: build %.0f, encode %.0f, decode %.0f, load %.0f, fetch %.0f ms%s%s\n", r + 1,
                 run.build, run.encode, run.decode, run.load, run.fetch,
                 run.fetched ? "" : " (failed: ", run.fetched ? "" : (run.fetch_error + ")").c_str());
  }
  (*server)->stop();

  auto med = [&](double Run::*field) {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.*field);
    return median(v);
  };
  const bool all_fetched = std::all_of(runs.begin(), runs.end(), [](const Run& r) { return r.fetched; });
  const double transfer = med(&Run::fetch) - med(&Run::build) - med(&Run::encode) - med(&Run::decode);
  std::printf(
      "| blocks | endpoints | keys/block | bytes | build (lock held) ms | encode ms | decode ms | load ms | "
      "fetch over loopback ms | of it transfer ms |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %zu | %d | %d | %zu | %.0f | %.0f | %.0f | %.0f | %s%.0f | %.0f |\n", runs[0].blocks, o.endpoints,
              o.keys, runs[0].bytes, med(&Run::build), med(&Run::encode), med(&Run::decode), med(&Run::load),
              all_fetched ? "" : "failed after ", med(&Run::fetch), all_fetched ? transfer : 0.0);
  std::printf("(medians of %d runs; loaded %zu blocks; peer timeout %lld ms)\n", o.runs, runs[0].loaded,
              static_cast<long long>(o.timeout_ms));
  return 0;
}
