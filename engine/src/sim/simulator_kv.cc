// simulator_kv.cc — KV movement in the simulator: a KV transfer over the fabric or a lower-tier
// read landing (the sequences waiting on it go on), a worker's tiers answering its scheduler's
// lookups and taking its offloads, and prefix-cache changes fed into the router's index. Apart from
// the event loop because these are the caches' and the links' concern; it is reached through an
// event (one direct call each) or the scheduler's and the pools' hooks, which are virtual anyway.
#include <algorithm>
#include <cstdint>
#include <span>

#include "simulator_impl.h"

namespace disagg {
namespace sim_detail {

void IndexFeed::on_block_stored(BlockHash hash) {
  auto r = index_->apply_stored(endpoint_, KvTier::gpu, std::span<const BlockHash>(&hash, 1));
  (void)r;
}

void IndexFeed::on_block_removed(BlockHash hash) {
  auto r = index_->apply_removed(endpoint_, KvTier::gpu, std::span<const BlockHash>(&hash, 1));
  (void)r;
}

void TierIndexFeed::on_block_stored(BlockHash hash) {
  for (const EndpointId e : endpoints_) {
    auto r = index_->apply_stored(e, tier_, std::span<const BlockHash>(&hash, 1));
    (void)r;
  }
}

void TierIndexFeed::on_block_removed(BlockHash hash) {
  for (const EndpointId e : endpoints_) {
    auto r = index_->apply_removed(e, tier_, std::span<const BlockHash>(&hash, 1));
    (void)r;
  }
}

std::int32_t WorkerTiers::lookup(std::span<const BlockHash> hashes, std::span<KvTier> tiers) {
  const double now = *clock_;
  std::int32_t n = 0;
  for (const BlockHash h : hashes) {
    int found = 0;
    for (int t = 1; t < kKvTierCount && found == 0; ++t) {
      KvTierCache* c = links[static_cast<std::size_t>(t)].cache;
      if (c != nullptr && c->holds(h, now)) found = t;
    }
    if (found == 0) break;
    links[static_cast<std::size_t>(found)].cache->touch(h);
    tiers[static_cast<std::size_t>(n++)] = static_cast<KvTier>(found);
  }
  return n;
}

void WorkerTiers::offload(std::span<const BlockHash> hashes, std::int32_t shared) {
  const double now = *clock_;
  for (int t = 1; t < kKvTierCount; ++t) {
    Link& l = links[static_cast<std::size_t>(t)];
    if (l.cache == nullptr) continue;
    // Blocks the tier holds already (written by an earlier sequence, or by another worker into
    // the shared store) need no write: refresh them, count the rest.
    std::int64_t fresh = 0;
    for (const BlockHash h : hashes) fresh += l.cache->touch(h) ? 0 : 1;
    if (fresh == 0) continue;
    if (l.write_free_at - now > l.spec.max_write_backlog_seconds) {
      totals_->offloads_skipped[static_cast<std::size_t>(t)] += fresh;
      continue;
    }
    const double bytes = static_cast<double>(fresh) * block_bytes_;
    const double done = std::max(now, l.write_free_at) + l.spec.latency_seconds + bytes / l.spec.write_bytes_per_second;
    l.write_free_at = done;
    totals_->bytes_offloaded[static_cast<std::size_t>(t)] += bytes;
    for (std::size_t i = 0; i < hashes.size(); ++i) {
      l.cache->insert(hashes[i], done, static_cast<std::int32_t>(i) < shared);
    }
  }
}

}  // namespace sim_detail

void Simulator::Impl::on_transfer_done(double now, std::int32_t f) {
  Flight& fl = flights[static_cast<std::size_t>(f)];
  if (fl.first_token_at == FirstTokenAt::transfer) {
    client_token(now, fl);  // the prefill's token arrives with the KV
    if (fl.output == 1) {
      // Nothing left to generate: the decode side's sequence, which only received the KV, is
      // retired without a step, and the request finishes.
      auto a = workers[static_cast<std::size_t>(fl.decode_worker)].sched.abort(fl.decode_handle);
      auto b = workers[static_cast<std::size_t>(fl.prefill_worker)].sched.release_held(fl.prefill_handle);
      (void)a;
      (void)b;
      const std::int32_t decode = fl.decode_worker, prefill = fl.prefill_worker;
      finish(now, f);
      kick(now, decode);
      kick(now, prefill);
      return;
    }
  }
  auto a = workers[static_cast<std::size_t>(fl.decode_worker)].sched.remote_kv_ready(fl.decode_handle);
  auto b = workers[static_cast<std::size_t>(fl.prefill_worker)].sched.release_held(fl.prefill_handle);
  (void)a;
  (void)b;
  kick(now, fl.decode_worker);
  kick(now, fl.prefill_worker);
}

void Simulator::Impl::on_tier_load_done(double now, std::int32_t f) {
  Flight& fl = flights[static_cast<std::size_t>(f)];
  if (--fl.load_pending > 0) return;  // another tier's read is still on its way
  auto ready = workers[static_cast<std::size_t>(fl.load_worker)].sched.tier_load_ready(fl.load_handle);
  (void)ready;
  kick(now, fl.load_worker);
}

}  // namespace disagg
