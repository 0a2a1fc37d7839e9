// EndpointTable: what vLLM's KV events do to the router's index, read through the table's own
// metrics page (disagg_router_kv_index_entries).
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace disagg::router
