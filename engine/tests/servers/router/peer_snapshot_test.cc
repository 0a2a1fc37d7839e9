// Peer snapshots (peer_snapshot.h): the codec's round trip and its bounds against malformed and
// hostile bytes, a warm start through two EndpointTables (one serves, the other loads), a DNS
// endpoint first seen after the start-time snapshot's window (one fetch of its own entries), and
// the listener's answer restricted to some endpoints over loopback (peer_link.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "endpoint_table.h"
#include "peer_link.h"
#include "peer_snapshot.h"

namespace disagg::router {
namespace {

PeerSnapshot sample() {
  PeerSnapshot s;
  s.instance = 0x1234567890abcdefULL;
  s.block_size = 16;
  PeerSnapshotEndpoint& a = s.endpoints.emplace_back();
  a.label = "10.0.0.7:8000";
  a.last_seq = 41;
  a.group = 0;
  const BlockHash k1[] = {101}, k2[] = {201, 202, 203, 204};
  a.add(KvTier::gpu, 0xfeedULL, k1);
  a.add(KvTier::cpu, 0xbeefULL, k2);
  PeerSnapshotEndpoint& b = s.endpoints.emplace_back();
  b.label = "[fd00::1]:8001";
  return s;
}

TEST(PeerSnapshot, RoundTrip) {
  // GIVEN a snapshot of two endpoints, one without blocks or sequence
  const PeerSnapshot s = sample();
  // WHEN it is encoded and decoded
  PeerSnapshot back;
  ASSERT_TRUE(decode_peer_snapshot(encode_peer_snapshot(s), back).has_value());
  // THEN every field survives
  EXPECT_EQ(back.instance, s.instance);
  EXPECT_EQ(back.block_size, 16);
  ASSERT_EQ(back.endpoints.size(), 2U);
  EXPECT_EQ(back.endpoints[0].label, "10.0.0.7:8000");
  EXPECT_EQ(back.endpoints[0].last_seq, 41);
  EXPECT_EQ(back.endpoints[0].group, 0);
  ASSERT_EQ(back.endpoints[0].blocks.size(), 2U);
  EXPECT_EQ(back.endpoints[0].blocks[1].tier, KvTier::cpu);
  EXPECT_EQ(back.endpoints[0].blocks[1].publisher, 0xbeefULL);
  const auto keys = back.endpoints[0].keys_of(back.endpoints[0].blocks[1]);
  EXPECT_EQ(std::vector<BlockHash>(keys.begin(), keys.end()), (std::vector<BlockHash>{201, 202, 203, 204}));
  EXPECT_EQ(back.endpoints[1].label, "[fd00::1]:8001");
  EXPECT_EQ(back.endpoints[1].last_seq, -1);
  EXPECT_EQ(back.block_count(), 2U);
}

TEST(PeerSnapshot, EveryTruncationIsRefused) {
  const std::string bytes = encode_peer_snapshot(sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    PeerSnapshot out;
    const auto r = decode_peer_snapshot(std::string_view(bytes).substr(0, n), out);
    ASSERT_FALSE(r.has_value()) << n;
  }
}

TEST(PeerSnapshot, BoundsAndMalformedFields) {
  const std::string good = encode_peer_snapshot(sample());
  PeerSnapshot out;
  // Too many bytes, endpoints or blocks for the limits.
  EXPECT_EQ(decode_peer_snapshot(good, out, PeerSnapshotLimits{good.size() - 1, 64, 100}).error(),
            PeerSnapshotErrc::too_large);
  EXPECT_EQ(decode_peer_snapshot(good, out, PeerSnapshotLimits{1 << 20, 1, 100}).error(), PeerSnapshotErrc::too_large);
  EXPECT_EQ(decode_peer_snapshot(good, out, PeerSnapshotLimits{1 << 20, 64, 1}).error(), PeerSnapshotErrc::too_large);
  // Not a snapshot, another version, bytes after the end.
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_EQ(decode_peer_snapshot(bad, out).error(), PeerSnapshotErrc::bad_magic);
  bad = good;
  bad[4] = 9;
  EXPECT_EQ(decode_peer_snapshot(bad, out).error(), PeerSnapshotErrc::bad_version);
  EXPECT_EQ(decode_peer_snapshot(good + "x", out).error(), PeerSnapshotErrc::malformed);
  // Offsets in the first endpoint: header 22, label length 2 + 13, seq 8, group 4, count 4 -> first
  // block's tier at 53, its key count at 54.
  constexpr std::size_t kTier = 22 + 2 + 13 + 8 + 4 + 4;
  bad = good;
  bad[kTier] = 7;
  EXPECT_EQ(decode_peer_snapshot(bad, out).error(), PeerSnapshotErrc::malformed);
  for (const char count : {char{0}, char{9}}) {
    bad = good;
    bad[kTier + 1] = count;
    EXPECT_EQ(decode_peer_snapshot(bad, out).error(), PeerSnapshotErrc::malformed);
  }
  // A hostile count (2^32 - 1 endpoints, or blocks) with a few bytes: refused before any allocation.
  bad = good;
  bad[18] = bad[19] = bad[20] = bad[21] = static_cast<char>(0xff);
  EXPECT_FALSE(decode_peer_snapshot(bad, out, PeerSnapshotLimits{1 << 20, 1u << 31, 1u << 31}).has_value());
  bad = good;
  for (std::size_t i = kTier - 4; i < kTier; ++i) bad[i] = static_cast<char>(0xff);
  EXPECT_EQ(decode_peer_snapshot(bad, out, PeerSnapshotLimits{1 << 20, 64, std::size_t{1} << 40}).error(),
            PeerSnapshotErrc::truncated);
}

TEST(PeerSnapshot, RandomMutationsNeverCrash) {
  const std::string good = encode_peer_snapshot(sample());
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20'000; ++i) {
    std::string b = good;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    PeerSnapshot out;
    if (decode_peer_snapshot(b, out).has_value()) {
      ++accepted;
      ASSERT_LE(out.block_count(), PeerSnapshotLimits{}.max_blocks);
      for (const auto& e : out.endpoints) {
        for (const auto& blk : e.blocks) ASSERT_LE(blk.first_key + blk.key_count, e.keys.size());
      }
    }
  }
  EXPECT_GT(accepted, 0);  // mutations of key values and hashes stay valid snapshots
}

// ---- two tables: one serves, the other loads ----------------------------------------------------

double index_entries(EndpointTable& table) {
  std::string page;
  table.write_metrics(page);
  const std::string name = "\ndisagg_router_kv_index_entries ";
  const std::size_t at = page.find(name);
  return at == std::string::npos ? -1 : std::stod(page.substr(at + name.size()));
}

struct Table {
  RouterMetrics metrics;
  std::unique_ptr<EndpointTable> table;
  std::int64_t resume_seq = -2;
  explicit Table(std::int32_t block_size = 16) {
    RouterConfig rc;
    rc.precise_prefix = true;
    rc.block_size = block_size;
    auto created = EndpointTable::create(rc, metrics);
    table = std::move(created.value());
    EndpointTable::Hooks hooks;
    hooks.added = [this](EndpointId, const EndpointSlot&, const std::string&, std::int64_t seq) { resume_seq = seq; };
    table->set_hooks(std::move(hooks));
  }
};

EndpointSpec worker() {
  EndpointSpec e;
  e.pool = "workers";
  e.host = "10.0.0.7";
  e.port = 8000;
  e.kv_events = "tcp://10.0.0.7:5557";
  return e;
}

// BlockStored of `blocks` 16-token blocks with publisher hashes base, base + 1, ... (a chain from
// `parent` when given), batch sequence `seq`.
KvEventBatch stored(BlockHash base, std::size_t blocks, std::optional<BlockHash> parent, std::int64_t seq) {
  KvEventBatch b;
  b.seq = seq;
  KvEventRecord e;
  e.block_size = 16;
  e.hash_count = static_cast<std::uint32_t>(blocks);
  e.has_parent = parent.has_value();
  e.parent = parent.value_or(0);
  e.token_count = static_cast<std::uint32_t>(16 * blocks);
  for (std::size_t i = 0; i < blocks; ++i) b.hashes.push_back(base + i);
  for (std::uint32_t t = 0; t < e.token_count; ++t) b.tokens.push_back(static_cast<TokenId>(1000 + base + t));
  b.events.push_back(e);
  return b;
}

TEST(PeerSnapshotTables, ALoadedSnapshotIsUsableAndResumesAfterItsSequence) {
  // GIVEN a router that applied batches 40 and 41 of a worker's events (5 blocks, chained)
  Table a;
  const int ida = a.table->add(worker(), false, "");
  const std::uint32_t gen = a.table->slot(ida).generation;
  a.table->on_kv_batch(static_cast<EndpointId>(ida), gen, stored(500, 3, std::nullopt, 40));
  a.table->on_kv_batch(static_cast<EndpointId>(ida), gen, stored(503, 2, BlockHash{502}, 41));
  ASSERT_EQ(index_entries(*a.table), 5);
  PeerSnapshot snap;
  a.table->snapshot(snap, 1'000);
  snap.instance = 1;
  // WHEN a restarted router loads its snapshot (over the wire) and then adds the same endpoint
  PeerSnapshot wire;
  ASSERT_TRUE(decode_peer_snapshot(encode_peer_snapshot(snap), wire).has_value());
  Table b;
  ASSERT_TRUE(b.table->set_peer_snapshot(std::move(wire)));
  const int idb = b.table->add(worker(), false, "");
  // THEN it holds the same entries and its KV events resume after sequence 41
  EXPECT_EQ(index_entries(*b.table), 5);
  EXPECT_EQ(b.resume_seq, 41);
  EXPECT_EQ(b.metrics.kv_warm_peer_blocks.load(), 5U);
  // AND the translations came along: a later removal of a loaded block finds its key, and a child
  // of a loaded block is keyed (its parent is known)
  const std::uint32_t genb = b.table->slot(idb).generation;
  KvEventBatch removed;
  removed.seq = 42;
  removed.hashes = {504};
  KvEventRecord r;
  r.type = KvEventType::block_removed;
  r.hash_count = 1;
  removed.events = {r};
  b.table->on_kv_batch(static_cast<EndpointId>(idb), genb, removed);
  EXPECT_EQ(index_entries(*b.table), 4);
  b.table->on_kv_batch(static_cast<EndpointId>(idb), genb, stored(600, 1, BlockHash{503}, 43));
  EXPECT_EQ(index_entries(*b.table), 5);
}

TEST(PeerSnapshotTables, BoundedAndRefusedAtAnotherBlockSize) {
  // GIVEN a router holding 5 blocks of one endpoint
  Table a;
  const int ida = a.table->add(worker(), false, "");
  a.table->on_kv_batch(static_cast<EndpointId>(ida), a.table->slot(ida).generation, stored(500, 5, std::nullopt, 3));
  // WHEN its snapshot is capped at 2 blocks
  PeerSnapshot snap;
  a.table->snapshot(snap, 2);
  // THEN the 2 newest are in it
  ASSERT_EQ(snap.endpoints.size(), 1U);
  ASSERT_EQ(snap.endpoints[0].blocks.size(), 2U);
  EXPECT_EQ(snap.endpoints[0].blocks[0].publisher, 503U);
  EXPECT_EQ(snap.endpoints[0].blocks[1].publisher, 504U);
  // AND a router keyed at another block size refuses it (its keys would never match)
  Table other(32);
  EXPECT_FALSE(other.table->set_peer_snapshot(snap));
  other.table->add(worker(), false, "");
  EXPECT_EQ(other.resume_seq, -1);
}

// ---- endpoints first seen late ------------------------------------------------------------------

DnsPoolSpec pool_of_workers() {
  DnsPoolSpec p;
  p.pool = "workers";
  p.host = "workers.ns.svc";
  p.ports = {8000};
  p.kv_events_port = 5557;
  return p;
}

// A router that applied batches 40 and 41 of 10.0.0.7:8000 (5 blocks) and 7 of 10.0.0.8:8000 (1).
struct Serving {
  Table a;
  Serving() {
    const int id7 = a.table->add(worker(), false, "");
    a.table->on_kv_batch(static_cast<EndpointId>(id7), a.table->slot(id7).generation, stored(500, 3, std::nullopt, 40));
    a.table->on_kv_batch(static_cast<EndpointId>(id7), a.table->slot(id7).generation,
                         stored(503, 2, BlockHash{502}, 41));
    EndpointSpec other = worker();
    other.host = "10.0.0.8";
    other.kv_events = "tcp://10.0.0.8:5557";
    const int id8 = a.table->add(other, false, "");
    a.table->on_kv_batch(static_cast<EndpointId>(id8), a.table->slot(id8).generation, stored(900, 1, std::nullopt, 7));
  }
  std::string bytes(const std::vector<std::string>* only) {
    PeerSnapshot snap;
    a.table->snapshot(snap, 1'000, only);
    snap.instance = 1;
    return encode_peer_snapshot(snap);
  }
};

TEST(PeerSnapshotTables, ADnsEndpointFirstSeenLateGetsOneFetchOfItsOwnEntries) {
  // GIVEN a peer holding two workers' entries, and a router past its start-time snapshot's window
  Serving peer;
  Table b;
  std::vector<std::vector<std::string>> asked;
  b.table->set_late_peer_fetch(
      [&](const std::vector<std::string>& labels) -> Expected<PeerSnapshot, std::string> {
        asked.push_back(labels);
        PeerSnapshot s;
        if (!decode_peer_snapshot(peer.bytes(&labels), s)) return unexpected(std::string("bad snapshot"));
        return s;
      },
      /*from_ms=*/0);
  // WHEN DNS brings 10.0.0.7 now
  b.table->sync_dns_pool(pool_of_workers(), {"10.0.0.7"});
  // THEN its entries were asked for, alone, and loaded before its KV events were subscribed to
  ASSERT_EQ(asked.size(), 1U);
  EXPECT_EQ(asked[0], (std::vector<std::string>{"10.0.0.7:8000"}));
  EXPECT_EQ(b.resume_seq, 41);
  EXPECT_EQ(index_entries(*b.table), 5);
  // WHEN it leaves DNS and comes back THEN it is not fetched for again (one fetch per endpoint)
  b.table->sync_dns_pool(pool_of_workers(), {});
  b.table->sync_dns_pool(pool_of_workers(), {"10.0.0.7"});
  EXPECT_EQ(asked.size(), 1U);
  EXPECT_EQ(b.resume_seq, -1);
  // AND another endpoint seen later gets its own fetch, for its label only
  b.table->sync_dns_pool(pool_of_workers(), {"10.0.0.7", "10.0.0.8"});
  ASSERT_EQ(asked.size(), 2U);
  EXPECT_EQ(asked[1], (std::vector<std::string>{"10.0.0.8:8000"}));
  EXPECT_EQ(b.resume_seq, 7);
}

TEST(PeerSnapshotTables, NoLateFetchWithinTheStartWindowOrWhenItFails) {
  // GIVEN a router still inside its start-time window
  Table b;
  int calls = 0;
  b.table->set_late_peer_fetch(
      [&](const std::vector<std::string>&) -> Expected<PeerSnapshot, std::string> {
        ++calls;
        return unexpected(std::string("peer down"));
      },
      now_ms() + 3'600'000);
  // WHEN DNS brings an endpoint THEN no fetch is made (the start-time snapshot covers it)
  b.table->sync_dns_pool(pool_of_workers(), {"10.0.0.7"});
  EXPECT_EQ(calls, 0);
  // AND past the window, a failing fetch leaves the endpoint cold but added
  Table c;
  c.table->set_late_peer_fetch(
      [&](const std::vector<std::string>&) -> Expected<PeerSnapshot, std::string> {
        ++calls;
        return unexpected(std::string("peer down"));
      },
      0);
  c.table->sync_dns_pool(pool_of_workers(), {"10.0.0.7"});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(c.resume_seq, -1);
  EXPECT_EQ(index_entries(*c.table), 0);
}

TEST(PeerLink, TheListenerAnswersTheWholeSnapshotOrSomeEndpointsOverLoopback) {
  // GIVEN a peer's listener on loopback, one of whose endpoints has an IPv6 label
  Serving peer;
  EndpointSpec v6 = worker();
  v6.host = "fd00::1";
  v6.port = 8001;
  v6.kv_events = "tcp://[fd00::1]:5557";
  const int id = peer.a.table->add(v6, false, "");
  peer.a.table->on_kv_batch(static_cast<EndpointId>(id), peer.a.table->slot(id).generation,
                            stored(700, 2, std::nullopt, 3));
  auto server = PeerSnapshotServer::create("127.0.0.1", 0, 2'000, [&](const std::vector<std::string>& only) {
    return peer.bytes(only.empty() ? nullptr : &only);
  });
  ASSERT_TRUE(server.has_value()) << server.error();
  (*server)->start();
  const std::uint16_t port = (*server)->port();
  // WHEN a router asks for everything, then for two endpoints
  auto all = fetch_peer_snapshot("127.0.0.1", port, /*own_instance=*/2, 2'000, PeerSnapshotLimits{});
  auto some =
      fetch_peer_snapshot("127.0.0.1", port, 2, 2'000, PeerSnapshotLimits{}, {"[fd00::1]:8001", "10.0.0.8:8000"});
  // THEN the first has the three endpoints, the second exactly the two named
  ASSERT_TRUE(all.has_value()) << all.error();
  EXPECT_EQ(all->endpoints.size(), 3U);
  ASSERT_TRUE(some.has_value()) << some.error();
  std::vector<std::string> labels;
  for (const auto& e : some->endpoints) labels.push_back(e.label);
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<std::string>{"10.0.0.8:8000", "[fd00::1]:8001"}));
  EXPECT_EQ(some->block_count(), 3U);
  // AND an endpoint the peer does not know yields an empty snapshot, and its own snapshot is refused
  auto none = fetch_peer_snapshot("127.0.0.1", port, 2, 2'000, PeerSnapshotLimits{}, {"10.9.9.9:8000"});
  ASSERT_TRUE(none.has_value()) << none.error();
  EXPECT_TRUE(none->endpoints.empty());
  auto own = fetch_peer_snapshot("127.0.0.1", port, /*own_instance=*/1, 2'000, PeerSnapshotLimits{});
  ASSERT_FALSE(own.has_value());
  EXPECT_NE(own.error().find("this router itself"), std::string::npos) << own.error();
  (*server)->stop();
}

}  // namespace
}  // namespace disagg::router
