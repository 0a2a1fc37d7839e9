// EndpointTable: what vLLM's KV events do to the router's index, read through the table's own
// metrics page (disagg_router_kv_index_entries).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "endpoint_table.h"

namespace disagg::router {
namespace {

// The index entries the metrics page reports.
double index_entries(EndpointTable& table) {
  std::string page;
  table.write_metrics(page);
  const std::string name = "\ndisagg_router_kv_index_entries ";
  const std::size_t at = page.find(name);
  EXPECT_NE(at, std::string::npos) << page.substr(0, 400);
  return at == std::string::npos ? -1 : std::stod(page.substr(at + name.size()));
}

TEST(EndpointTableKvEvents, AllBlocksClearedDropsTheGpuTierOnly) {
  // GIVEN one endpoint holding 3 blocks on the GPU and 2 offloaded to CPU
  RouterConfig rc;
  rc.precise_prefix = true;
  EndpointSpec e;
  e.pool = "workers";
  e.host = "127.0.0.1";
  e.port = 9000;
  rc.endpoints.push_back(e);
  RouterMetrics metrics;
  auto table_or = EndpointTable::create(rc, metrics);
  ASSERT_TRUE(table_or.has_value()) << table_or.error();
  EndpointTable& table = **table_or;
  const int id = table.add(e, false, "");
  ASSERT_GE(id, 0);
  const std::uint32_t gen = table.slot(id).generation;
  KvEventBatch stored;
  stored.hashes = {11, 12, 13, 21, 22};
  KvEventRecord gpu;
  gpu.hash_count = 3;
  KvEventRecord cpu;
  cpu.tier = KvTier::cpu;
  cpu.first_hash = 3;
  cpu.hash_count = 2;
  stored.events = {gpu, cpu};
  table.on_kv_batch(static_cast<EndpointId>(id), gen, stored);
  ASSERT_EQ(index_entries(table), 5);
  // WHEN vLLM resets its GPU prefix cache (AllBlocksCleared)
  KvEventBatch cleared;
  KvEventRecord all;
  all.type = KvEventType::all_blocks_cleared;
  cleared.events = {all};
  table.on_kv_batch(static_cast<EndpointId>(id), gen, cleared);
  // THEN the offloaded copies stay in the index
  EXPECT_EQ(index_entries(table), 2);
  // AND a lost stream (the subscriber's clear) still drops everything the endpoint had
  table.on_kv_clear(static_cast<EndpointId>(id), gen, "test");
  EXPECT_EQ(index_entries(table), 0);
}

// A one-endpoint table with the KV-event index (router block size 16).
struct OneEndpoint {
  RouterConfig rc;
  RouterMetrics metrics;
  std::unique_ptr<EndpointTable> table;
  int id = -1;
  std::uint32_t gen = 0;
  OneEndpoint() {
    rc.precise_prefix = true;
    EndpointSpec e;
    e.pool = "workers";
    e.host = "127.0.0.1";
    e.port = 9000;
    rc.endpoints.push_back(e);
    auto t = EndpointTable::create(rc, metrics);
    EXPECT_TRUE(t.has_value());
    table = std::move(*t);
    id = table->add(e, false, "");
    gen = table->slot(id).generation;
    table->slot(id).up = true;  // as a passed health check leaves it
  }
  void apply(const KvEventBatch& b) { table->on_kv_batch(static_cast<EndpointId>(id), gen, b); }
  // The blocks of `tokens` (chained from `root`) the endpoint is credited with by routing.
  std::int32_t cached(const std::vector<TokenId>& tokens, BlockHash root = kRootBlockHash) {
    RouteRequest rq;
    std::vector<BlockHash> h(tokens.size() / 16);
    h.resize(hash_blocks(tokens, 16, root, h));
    rq.request_id = ++requests;
    rq.prompt_tokens = static_cast<std::int64_t>(tokens.size());
    rq.block_hashes = h;
    rq.block_size = 16;
    Plan p = table->plan(rq, 0, true, Clock::now());
    EXPECT_TRUE(p.main.ok());
    const std::int32_t blocks = p.main.cached_blocks;
    table->finish(p.main, rq.request_id);
    return blocks;
  }
  std::uint64_t requests = 0;
};

std::vector<TokenId> some_tokens(std::size_t n, TokenId seed) {
  std::vector<TokenId> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<TokenId>((seed * 7919 + static_cast<TokenId>(i) * 31) % 50000);
  return t;
}

// A BlockStored of `tokens` (16 per block) under vLLM `hashes`, in `tier`.
KvEventBatch store(const std::vector<BlockHash>& hashes, const std::vector<TokenId>& tokens, KvTier tier,
                   std::optional<BlockHash> parent = std::nullopt) {
  KvEventBatch b;
  b.hashes = hashes;
  b.tokens = tokens;
  KvEventRecord r;
  r.tier = tier;
  r.hash_count = static_cast<std::uint32_t>(hashes.size());
  r.token_count = static_cast<std::uint32_t>(tokens.size());
  r.block_size = tokens.empty() ? 0 : 16;
  r.has_parent = parent.has_value();
  r.parent = parent.value_or(0);
  b.events = {r};
  return b;
}

KvEventBatch remove(const std::vector<BlockHash>& hashes, KvTier tier) {
  KvEventBatch b;
  b.hashes = hashes;
  KvEventRecord r;
  r.type = KvEventType::block_removed;
  r.tier = tier;
  r.hash_count = static_cast<std::uint32_t>(hashes.size());
  b.events = {r};
  return b;
}

TEST(EndpointTableKvEvents, AnOffloadedCopysEvictionLeavesTheGpuTranslationAlone) {
  // GIVEN 3 GPU blocks (vLLM hashes 101..103) of a 64-token prompt
  OneEndpoint ep;
  const auto prompt = some_tokens(64, 1);
  ep.apply(store({101, 102, 103}, std::vector<TokenId>(prompt.begin(), prompt.begin() + 48), KvTier::gpu));
  ASSERT_EQ(index_entries(*ep.table), 3);
  // WHEN vLLM's OffloadingConnector stores the same hashes on CPU without token ids (its default
  // placeholder payload), then evicts them from CPU
  ep.apply(store({101, 102, 103}, {}, KvTier::cpu));
  EXPECT_EQ(index_entries(*ep.table), 6) << "the CPU copies take the GPU blocks' keys";
  ep.apply(remove({101, 102, 103}, KvTier::cpu));
  EXPECT_EQ(index_entries(*ep.table), 3);
  // THEN a GPU child of block 103 is still keyed (its parent's translation survived)
  ep.apply(store({104}, std::vector<TokenId>(prompt.begin() + 48, prompt.end()), KvTier::gpu, 103));
  EXPECT_EQ(index_entries(*ep.table), 4);
  // AND a GPU removal of 101 still finds its key
  ep.apply(remove({101}, KvTier::gpu));
  EXPECT_EQ(index_entries(*ep.table), 3);
  ep.apply(store({101}, std::vector<TokenId>(prompt.begin(), prompt.begin() + 16), KvTier::gpu));
  // AND routing (first asked here: the policy's own pending routes would credit a prompt it has
  // routed before) finds the whole GPU prefix
  EXPECT_EQ(ep.cached(prompt), 4);
}

TEST(EndpointTableKvEvents, ASelfDescribingCpuCopyChainsFromItsGpuParent) {
  // GIVEN GPU block 201 and, on CPU only, its child 202 with tokens (self-describing events, vLLM
  // PR #43468) whose parent the CPU tier never stored
  OneEndpoint ep;
  const auto prompt = some_tokens(32, 2);
  ep.apply(store({201}, std::vector<TokenId>(prompt.begin(), prompt.begin() + 16), KvTier::gpu));
  ep.apply(store({202}, std::vector<TokenId>(prompt.begin() + 16, prompt.end()), KvTier::cpu, 201));
  // THEN the CPU block is keyed from its GPU parent: routing credits both blocks
  EXPECT_EQ(index_entries(*ep.table), 2);
  EXPECT_EQ(ep.cached(prompt), 2);
}

TEST(EndpointTableKvEvents, SaltedAndLoraBlocksMatchOnlyRequestsWithTheSameExtraKeys) {
  // GIVEN an endpoint that stored a prompt for a LoRA adapter with a cache_salt
  OneEndpoint ep;
  const auto prompt = some_tokens(48, 3);
  KvEventBatch b = store({301, 302, 303}, prompt, KvTier::gpu);
  b.events[0].lora = extra_key_digest("sql-lora");
  b.events[0].cache_salt = extra_key_digest("tenant-a");
  ep.apply(b);
  // THEN only a request with the same adapter and salt gets prefix credit
  EXPECT_EQ(ep.cached(prompt, chain_root(extra_key_digest("sql-lora"), extra_key_digest("tenant-a"))), 3);
  EXPECT_EQ(ep.cached(prompt), 0);
  EXPECT_EQ(ep.cached(prompt, chain_root(extra_key_digest("sql-lora"), 0)), 0);
  EXPECT_EQ(ep.cached(prompt, chain_root(0, extra_key_digest("tenant-a"))), 0);
  EXPECT_EQ(ep.cached(prompt, chain_root(extra_key_digest("sql-lora"), extra_key_digest("tenant-b"))), 0);
}

}  // namespace
}  // namespace disagg::router
