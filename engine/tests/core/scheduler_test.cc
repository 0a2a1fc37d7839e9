// Scheduler: unit cases per role, and a differential test against a deliberately simple reference
// scheduler (std::deque / std::vector over ReferencePool) with seeded random request streams.
#include "disagg/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "kv_block_pool_reference.h"
#include "test_fixtures.h"

namespace disagg {
namespace {

// Runs steps until idle; returns every completion event.
std::vector<SchedEvent> drain(Scheduler& s, int max_steps = 100000) {
  std::vector<SchedEvent> all;
  for (int i = 0; i < max_steps; ++i) {
    auto plan = s.next_step();
    EXPECT_TRUE(plan.has_value());
    const bool empty = (*plan)->empty();
    auto ev = s.complete_step();
    EXPECT_TRUE(ev.has_value());
    all.insert(all.end(), ev->begin(), ev->end());
    if (empty) break;
  }
  return all;
}

TEST(Scheduler, ChunkedPrefillThenDecodeEmitsEveryTokenOnce) {
  // GIVEN a budget of 8 tokens per step and a 20-token prompt with 3 output tokens
  auto s = *Scheduler::create(test::small_config(64, 4, 8), test::cost_model());
  std::vector<BlockHash> hashes;
  ASSERT_TRUE(s.submit({7, RequestKind::full, 20, 3, hashes}).has_value());
  // WHEN it runs: chunks of 8, 8, 4 (first token), then two decode steps
  std::vector<std::int64_t> prefill;
  std::vector<SchedEvent> events;
  while (true) {
    const StepPlan* p = *s.next_step();
    if (p->empty()) {
      (void)s.complete_step();
      break;
    }
    prefill.push_back(p->batch.prefill_tokens);
    auto ev = *s.complete_step();
    events.insert(events.end(), ev.begin(), ev.end());
  }
  // THEN
  EXPECT_EQ(prefill, (std::vector<std::int64_t>{8, 8, 4, 0, 0}));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, SchedEventKind::first_token);
  EXPECT_EQ(events[2].kind, SchedEventKind::token);
  EXPECT_EQ(events[2].value, 3);
  EXPECT_EQ(events[3].kind, SchedEventKind::finished);
  EXPECT_EQ(s.pool().used_blocks(), 0);
  EXPECT_TRUE(s.check_invariants().has_value());
}

TEST(Scheduler, PrefixHitSkipsCachedBlocksButComputesTheLastToken) {
  // GIVEN a finished request whose 16-token prompt filled 4 published blocks
  auto s = *Scheduler::create(test::small_config(64, 4, 64), test::cost_model());
  std::vector<TokenId> tokens(16);
  for (int i = 0; i < 16; ++i) tokens[static_cast<std::size_t>(i)] = i;
  std::vector<BlockHash> h(4);
  hash_blocks(tokens, 4, kRootBlockHash, h);
  ASSERT_TRUE(s.submit({1, RequestKind::full, 16, 1, h}).has_value());
  drain(s);
  // WHEN the same prompt comes again
  ASSERT_TRUE(s.submit({2, RequestKind::full, 16, 1, h}).has_value());
  const StepPlan* p = *s.next_step();
  // THEN 3 blocks hit (the last token must be computed), so 4 tokens are prefilled after 12 cached
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].kind, SchedEventKind::admitted);
  EXPECT_EQ(p->events[0].value, 12);
  EXPECT_EQ(p->batch.prefill_tokens, 4);
  EXPECT_EQ(p->batch.prefill_prior_tokens, 12);
  (void)s.complete_step();
  EXPECT_EQ(s.stats().prompt_tokens_hit, 12);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  // GIVEN 6 blocks of 4 tokens and two requests that each grow to 3 blocks and beyond
  auto s = *Scheduler::create(test::small_config(6, 4, 64), test::cost_model());
  ASSERT_TRUE(s.submit({1, RequestKind::full, 8, 10, {}}).has_value());
  ASSERT_TRUE(s.submit({2, RequestKind::full, 8, 10, {}}).has_value());
  // WHEN they decode until the pool is full
  auto events = drain(s);
  // THEN the newer one was preempted at least once, and both still finish exactly once
  EXPECT_GE(s.stats().preemptions, 1);
  std::map<std::uint64_t, int> finished;
  for (const auto& e : events) {
    if (e.kind == SchedEventKind::finished) ++finished[e.id];
  }
  EXPECT_EQ(finished[1], 1);
  EXPECT_EQ(finished[2], 1);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(Scheduler, PreemptedSequenceFindsItsPrivateBlocksAgain) {
  // GIVEN 6 blocks of 4 tokens and two requests whose blocks are all private (unique hashes)
  auto s = *Scheduler::create(test::small_config(6, 4, 64), test::cost_model());
  std::vector<BlockHash> a(4), b(4);
  for (std::size_t i = 0; i < 4; ++i) {
    a[i] = 1000 + i;
    b[i] = 2000 + i;
  }
  SchedRequest ra{1, RequestKind::full, 8, 10, a};
  SchedRequest rb{2, RequestKind::full, 8, 10, b};
  ra.shared_blocks = rb.shared_blocks = 0;
  ASSERT_TRUE(s.submit(ra).has_value());
  ASSERT_TRUE(s.submit(rb).has_value());
  // WHEN they decode until the newer one is preempted and comes back
  std::int32_t readmitted_hits = -1;
  int admissions_of_2 = 0;
  for (int i = 0; i < 1000 && s.num_unfinished() > 0; ++i) {
    const StepPlan* p = *s.next_step();
    for (const SchedEvent& e : p->events) {
      if (e.kind == SchedEventKind::admitted && e.id == 2 && ++admissions_of_2 == 2) readmitted_hits = e.value;
    }
    (void)s.complete_step();
    ASSERT_TRUE(s.check_invariants().has_value());
  }
  // THEN it was preempted, found its published (private) blocks in the cache, and both finished
  EXPECT_GE(s.stats().preemptions, 1);
  EXPECT_GT(readmitted_hits, 0);
  EXPECT_EQ(s.num_unfinished(), 0);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(Scheduler, PrefillOnlyHoldsBlocksUntilReleased) {
  // GIVEN a prefill worker
  auto c = test::small_config(16, 4, 64);
  c.role = WorkerRole::prefill;
  auto s = *Scheduler::create(c, test::cost_model());
  EXPECT_EQ(s.submit({1, RequestKind::remote_kv, 8, 4, {}}).error(), SchedErrc::wrong_role);
  const SeqHandle h = *s.submit({1, RequestKind::prefill_only, 10, 99, {}});
  // WHEN it runs
  auto events = drain(s);
  // THEN one token, finished, blocks held until release_held
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, SchedEventKind::finished);
  EXPECT_EQ(s.num_held(), 1);
  EXPECT_EQ(s.pool().used_blocks(), 3);
  ASSERT_TRUE(s.release_held(h).has_value());
  EXPECT_EQ(s.pool().used_blocks(), 0);
  EXPECT_EQ(s.release_held(h).error(), SchedErrc::not_found);
}

TEST(Scheduler, RemoteKvAllocatesPromptAndWaitsForTheTransfer) {
  // GIVEN a decode worker and a remote_kv request with a 10-token prompt
  auto c = test::small_config(16, 4, 64);
  c.role = WorkerRole::decode;
  auto s = *Scheduler::create(c, test::cost_model());
  const SeqHandle h = *s.submit({5, RequestKind::remote_kv, 10, 2, {}});
  // WHEN planned
  const StepPlan* p = *s.next_step();
  // THEN it pulls all 10 tokens, holds 3 blocks, and computes nothing yet
  ASSERT_EQ(p->events.size(), 2u);
  EXPECT_EQ(p->events[1].kind, SchedEventKind::kv_pull);
  EXPECT_EQ(p->events[1].value, 10);
  EXPECT_TRUE(p->empty());
  (void)s.complete_step();
  EXPECT_EQ(s.pool().used_blocks(), 3);
  EXPECT_FALSE(s.has_work());
  // WHEN the KV arrives THEN it decodes two tokens as decode steps
  ASSERT_TRUE(s.remote_kv_ready(h).has_value());
  const StepPlan* p2 = *s.next_step();
  EXPECT_EQ(p2->batch.decode_sequences, 1);
  EXPECT_EQ(p2->batch.decode_context_tokens, 9);
  (void)s.complete_step();
  auto rest = drain(s);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().kind, SchedEventKind::finished);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(Scheduler, RefusesWhatCanNeverFitAndBoundsTheQueue) {
  auto c = test::small_config(4, 2, 16);
  c.max_waiting = 2;
  auto s = *Scheduler::create(c, test::cost_model());
  EXPECT_EQ(s.submit({1, RequestKind::full, 16, 2, {}}).error(), SchedErrc::too_long);
  EXPECT_EQ(s.submit({1, RequestKind::full, 0, 2, {}}).error(), SchedErrc::invalid_request);
  ASSERT_TRUE(s.submit({1, RequestKind::full, 4, 2, {}}).has_value());
  ASSERT_TRUE(s.submit({2, RequestKind::full, 4, 2, {}}).has_value());
  EXPECT_EQ(s.submit({3, RequestKind::full, 4, 2, {}}).error(), SchedErrc::queue_full);
  EXPECT_EQ(s.complete_step().error(), SchedErrc::step_pending);
  ASSERT_TRUE(s.next_step().has_value());
  EXPECT_EQ(s.next_step().error(), SchedErrc::step_pending);
  EXPECT_EQ(Scheduler::create(test::small_config(0, 1, 1), test::cost_model()).error(), SchedErrc::invalid_config);
}

// ---- reference model -------------------------------------------------------------------------

// The documented policy written the obvious way: same order of decisions, different structures.
class ReferenceScheduler {
 public:
  struct Req {
    std::uint64_t id;
    int prompt, max_output;
    std::vector<std::uint64_t> hashes;
    int output = 0, computed = 0, published = 0, scheduled = 0;
    std::vector<int> blocks;
  };
  using Ev = std::tuple<int, std::uint64_t, int>;  // kind, id, value

  ReferenceScheduler(int blocks, int bs, int seqs, int budget) : pool_(blocks), bs_(bs), seqs_(seqs), budget_(budget) {}

  void submit(Req r) {
    const std::uint64_t id = r.id;
    reqs_[id] = std::move(r);
    waiting_.push_back(id);
  }

  // Returns planning events, completion events and the batch's (prefill tokens, decode seqs).
  std::tuple<std::vector<Ev>, std::vector<Ev>, std::int64_t, std::int64_t> step() {
    std::vector<Ev> plan, done;
    std::vector<std::uint64_t> scheduled;
    std::int64_t prefill = 0, decode = 0;
    int budget = budget_;
    bool preempted = false;
    for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Req& r = reqs_[running_[i]];
      const int want = std::min(r.prompt + r.output - r.computed, budget);
      bool self = false;
      while (!grow(r, r.computed + want)) {
        const std::uint64_t victim = running_.back();
        running_.pop_back();
        Req& v = reqs_[victim];
        plan.emplace_back(int(SchedEventKind::preempted), victim, v.computed);
        pool_.release(v.blocks);
        v.blocks.clear();
        v.computed = v.published = 0;
        waiting_.push_front(victim);
        preempted = true;
        if (victim == r.id) {
          self = true;
          break;
        }
      }
      if (self) break;
      r.scheduled = want;
      budget -= want;
      scheduled.push_back(r.id);
      if (want == 1 && r.computed + 1 == r.prompt + r.output && r.output > 0) ++decode;
      else prefill += want;
    }
    while (!preempted && !waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < seqs_) {
      Req& r = reqs_[waiting_.front()];
      const int known = r.prompt + r.output;
      std::vector<std::uint64_t> lookup(r.hashes.begin(),
                                        r.hashes.begin() + std::min<std::size_t>(r.hashes.size(), (known - 1) / bs_));
      const int hits = pool_.plan(lookup, static_cast<int>(lookup.size())).cached;
      lookup.resize(static_cast<std::size_t>(hits));
      const int want = std::min(known - hits * bs_, budget);
      const int total = (hits * bs_ + want + bs_ - 1) / bs_;
      auto p = pool_.plan(lookup, total);
      if (!p.fits) break;
      r.blocks = pool_.commit(p, lookup);
      r.computed = hits * bs_;
      r.published = hits;
      r.scheduled = want;
      budget -= want;
      prefill += want;
      plan.emplace_back(int(SchedEventKind::admitted), r.id, hits * bs_);
      running_.push_back(r.id);
      scheduled.push_back(r.id);
      waiting_.pop_front();
    }
    for (std::uint64_t id : scheduled) {
      Req& r = reqs_[id];
      r.computed += r.scheduled;
      r.scheduled = 0;
      const int full =
          std::min<int>({r.computed / bs_, static_cast<int>(r.hashes.size()), static_cast<int>(r.blocks.size())});
      for (int b = r.published; b < full; ++b)
        pool_.publish(r.blocks[static_cast<std::size_t>(b)], r.hashes[static_cast<std::size_t>(b)]);
      r.published = std::max(r.published, full);
      if (r.computed < r.prompt + r.output) continue;
      ++r.output;
      done.emplace_back(int(r.output == 1 ? SchedEventKind::first_token : SchedEventKind::token), id, r.output);
      if (r.output < r.max_output) continue;
      done.emplace_back(int(SchedEventKind::finished), id, r.output);
      pool_.release(r.blocks);
      r.blocks.clear();
      running_.erase(std::find(running_.begin(), running_.end(), id));
    }
    return {plan, done, prefill, decode};
  }

  int used() const { return pool_.used(); }

 private:
  bool grow(Req& r, int tokens) {
    const int need = (tokens + bs_ - 1) / bs_;
    const int have = static_cast<int>(r.blocks.size());
    if (need <= have) return true;
    auto p = pool_.plan({}, need - have);
    if (!p.fits) return false;
    auto fresh = pool_.commit(p, {});
    r.blocks.insert(r.blocks.end(), fresh.begin(), fresh.end());
    return true;
  }

  testing::ReferencePool pool_;
  int bs_, seqs_, budget_;
  std::map<std::uint64_t, Req> reqs_;
  std::deque<std::uint64_t> waiting_;
  std::vector<std::uint64_t> running_;
};

class SchedulerDifferential : public ::testing::TestWithParam<int> {};

TEST_P(SchedulerDifferential, MatchesTheReferenceStepByStep) {
  // GIVEN a seeded stream of requests sharing prefixes, on a pool small enough to preempt
  const int seed = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  const int bs = 4, blocks = 40 + seed % 3 * 20, seqs = 3 + seed % 4, budget = 8 + seed % 3 * 12;
  auto s = *Scheduler::create(test::small_config(blocks, seqs, budget), test::cost_model());
  ReferenceScheduler ref(blocks, bs, seqs, budget);
  std::vector<std::vector<TokenId>> prefixes(3);
  for (auto& p : prefixes) {
    for (int i = 0; i < 12; ++i) p.push_back(static_cast<TokenId>(rng() % 1000));
  }
  std::deque<std::vector<BlockHash>> hash_store;  // stable storage for the spans
  std::map<std::uint64_t, int> finished;
  std::uint64_t next_id = 1;
  int outstanding = 0;
  for (int step = 0; step < 1500; ++step) {
    // WHEN requests arrive at random between steps
    if (next_id <= 120 && rng() % 3 == 0) {
      std::vector<TokenId> tokens = prefixes[rng() % 3];
      const int extra = 1 + static_cast<int>(rng() % 30);
      for (int i = 0; i < extra; ++i) tokens.push_back(static_cast<TokenId>(rng() % 1000));
      const int out = 1 + static_cast<int>(rng() % 25);
      std::vector<BlockHash> h(tokens.size() / bs);
      hash_blocks(tokens, bs, kRootBlockHash, h);
      hash_store.push_back(h);
      const int prompt = static_cast<int>(tokens.size());
      if (s.submit({next_id, RequestKind::full, prompt, out, hash_store.back()}).has_value()) {
        ref.submit({next_id, prompt, out, std::vector<std::uint64_t>(h.begin(), h.end()), 0, 0, 0, 0, {}});
        ++outstanding;
      }
      ++next_id;
    }
    const StepPlan* p = *s.next_step();
    std::vector<ReferenceScheduler::Ev> got_plan;
    for (const auto& e : p->events) got_plan.emplace_back(int(e.kind), e.id, e.value);
    const std::int64_t prefill = p->batch.prefill_tokens, decode = p->batch.decode_sequences;
    auto done = *s.complete_step();
    std::vector<ReferenceScheduler::Ev> got_done;
    for (const auto& e : done) {
      got_done.emplace_back(int(e.kind), e.id, e.value);
      if (e.kind == SchedEventKind::finished) {
        ++finished[e.id];
        --outstanding;
      }
    }
    auto [want_plan, want_done, want_prefill, want_decode] = ref.step();
    // THEN every decision, token and block count agrees with the reference
    ASSERT_EQ(got_plan, want_plan) << "seed " << seed << " step " << step;
    ASSERT_EQ(got_done, want_done) << "seed " << seed << " step " << step;
    ASSERT_EQ(prefill, want_prefill) << "step " << step;
    ASSERT_EQ(decode, want_decode) << "step " << step;
    ASSERT_EQ(s.pool().used_blocks(), ref.used()) << "step " << step;
    ASSERT_LE(s.pool().used_blocks(), blocks);
    ASSERT_TRUE(s.check_invariants().has_value()) << s.check_invariants().error();
  }
  drain(s);
  // AND every request finished exactly once, and no block leaked
  EXPECT_EQ(s.num_unfinished(), 0);
  for (auto [id, n] : finished) EXPECT_EQ(n, 1) << "request " << id;
  EXPECT_EQ(s.pool().used_blocks(), 0);
  EXPECT_GT(s.stats().prompt_tokens_hit, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerDifferential, ::testing::Range(1, 13));

// ---- abort ---------------------------------------------------------------------------------------

namespace abort_test {

std::vector<BlockHash> chain(std::uint64_t seed, std::size_t blocks) {
  std::vector<BlockHash> h(blocks);
  for (std::size_t i = 0; i < blocks; ++i) h[i] = seed * 1000 + i;
  return h;
}

void expect_sound(const Scheduler& s) {
  auto ok = s.check_invariants();
  EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error());
}

}  // namespace abort_test

TEST(SchedulerAbort, WaitingSequenceLeavesTheQueueInOrder) {
  // GIVEN one run slot and three requests: 1 runs, 2 and 3 wait
  auto s = *Scheduler::create(test::small_config(64, 1, 64), test::cost_model());
  ASSERT_TRUE(s.submit({1, RequestKind::full, 4, 3, {}}).has_value());
  const SeqHandle h2 = *s.submit({2, RequestKind::full, 4, 3, {}});
  ASSERT_TRUE(s.submit({3, RequestKind::full, 4, 3, {}}).has_value());
  (void)*s.next_step();
  (void)*s.complete_step();
  ASSERT_EQ(s.num_waiting(), 2);
  // WHEN the middle of the queue is aborted
  ASSERT_TRUE(s.abort(h2).has_value());
  // THEN it is gone at once, counted, and the others finish in FIFO order without it
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(s.stats().aborted, 1);
  abort_test::expect_sound(s);
  std::vector<std::uint64_t> finished;
  for (const auto& e : drain(s)) {
    EXPECT_NE(e.id, 2u);
    if (e.kind == SchedEventKind::finished) finished.push_back(e.id);
  }
  EXPECT_EQ(finished, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(s.abort(h2).error(), SchedErrc::not_found);
  EXPECT_EQ(s.abort(-1).error(), SchedErrc::not_found);
  EXPECT_EQ(s.abort(1 << 30).error(), SchedErrc::not_found);
  EXPECT_EQ(s.stats().aborted, 1);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(SchedulerAbort, RunningSequenceFreesItsBlocksAndKeepsFullOnesCached) {
  // GIVEN a running request whose 12-token prompt filled 3 published blocks, decoding
  auto s = *Scheduler::create(test::small_config(64, 4, 64), test::cost_model());
  const auto hashes = abort_test::chain(1, 8);
  const SeqHandle h = *s.submit({1, RequestKind::full, 12, 20, hashes});
  for (int i = 0; i < 3; ++i) {
    (void)*s.next_step();
    (void)*s.complete_step();
  }
  ASSERT_GT(s.pool().used_blocks(), 0);
  // WHEN it is aborted
  ASSERT_TRUE(s.abort(h).has_value());
  // THEN nothing is in use, its full blocks stay cached (free), nothing runs
  EXPECT_EQ(s.pool().used_blocks(), 0);
  EXPECT_GE(s.pool().free_cached_blocks(), 3);
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_FALSE(s.has_work());
  abort_test::expect_sound(s);
  // AND the same prompt hits the cache it left behind
  ASSERT_TRUE(s.submit({2, RequestKind::full, 12, 1, hashes}).has_value());
  const StepPlan* p = *s.next_step();
  ASSERT_FALSE(p->events.empty());
  EXPECT_EQ(p->events[0].value, 8);  // 2 of 3 prompt blocks: the last token is always computed
  (void)*s.complete_step();
  drain(s);
  EXPECT_EQ(s.stats().finished, 1);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(SchedulerAbort, MidPlanTheSequenceIsNeitherAdvancedNorReported) {
  // GIVEN two decoding requests and a pending plan that schedules both
  auto s = *Scheduler::create(test::small_config(64, 4, 64), test::cost_model());
  const SeqHandle a = *s.submit({1, RequestKind::full, 5, 10, abort_test::chain(1, 3)});
  ASSERT_TRUE(s.submit({2, RequestKind::full, 5, 10, abort_test::chain(2, 3)}).has_value());
  (void)*s.next_step();
  (void)*s.complete_step();
  const StepPlan* p = *s.next_step();
  ASSERT_EQ(p->num_scheduled, 2);
  // WHEN one is aborted before the step completes
  ASSERT_TRUE(s.abort(a).has_value());
  abort_test::expect_sound(s);
  // AND its handle is reused by a new request while the plan is still pending
  const SeqHandle reused = *s.submit({3, RequestKind::full, 5, 2, {}});
  EXPECT_EQ(reused, a);
  // THEN the completion reports only request 2; the new one was not part of the plan
  auto done = *s.complete_step();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 2u);
  EXPECT_EQ(done[0].value, 2);
  abort_test::expect_sound(s);
  // AND both others finish; request 1 never appears again
  std::map<std::uint64_t, int> finished;
  for (const auto& e : drain(s)) {
    EXPECT_NE(e.id, 1u);
    if (e.kind == SchedEventKind::finished) ++finished[e.id];
  }
  EXPECT_EQ(finished[2], 1);
  EXPECT_EQ(finished[3], 1);
  EXPECT_EQ(s.stats().aborted, 1);
  EXPECT_EQ(s.stats().finished, 2);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(SchedulerAbort, AdmittedInThePendingPlanOrPreemptedByIt) {
  // GIVEN 6 blocks of 4 tokens: two requests grow until the newer is preempted
  auto s = *Scheduler::create(test::small_config(6, 4, 64), test::cost_model());
  ASSERT_TRUE(s.submit({1, RequestKind::full, 8, 10, {}}).has_value());
  const SeqHandle b = *s.submit({2, RequestKind::full, 8, 10, {}});
  // WHEN the plan that admits them is pending, request 2 is aborted
  const StepPlan* p = *s.next_step();
  ASSERT_EQ(p->num_scheduled, 2);
  ASSERT_TRUE(s.abort(b).has_value());
  auto first = *s.complete_step();
  // THEN only request 1 gets its first token, and it runs alone to the end without preemption
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].id, 1u);
  drain(s);
  EXPECT_EQ(s.stats().preemptions, 0);
  EXPECT_EQ(s.pool().used_blocks(), 0);

  // GIVEN the two again; WHEN a plan preempts one (back to waiting) and it is aborted mid-plan
  ASSERT_TRUE(s.submit({3, RequestKind::full, 8, 10, {}}).has_value());
  ASSERT_TRUE(s.submit({4, RequestKind::full, 8, 10, {}}).has_value());
  bool aborted_preempted = false;
  for (int i = 0; i < 100 && s.num_unfinished() > 0; ++i) {
    const StepPlan* q = *s.next_step();
    for (const SchedEvent& e : q->events) {
      if (e.kind == SchedEventKind::preempted && !aborted_preempted) {
        ASSERT_TRUE(s.abort(e.handle).has_value());
        aborted_preempted = true;
        abort_test::expect_sound(s);
      }
    }
    (void)*s.complete_step();
    abort_test::expect_sound(s);
  }
  // THEN the preempted one left the queue and the other finished
  EXPECT_TRUE(aborted_preempted);
  EXPECT_EQ(s.num_unfinished(), 0);
  EXPECT_EQ(s.stats().aborted, 2);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(SchedulerAbort, PullingAndHeldSequences) {
  // GIVEN a decode worker with a remote_kv request waiting for its KV
  auto dc = test::small_config(16, 4, 64);
  dc.role = WorkerRole::decode;
  auto d = *Scheduler::create(dc, test::cost_model());
  const SeqHandle pull = *d.submit({5, RequestKind::remote_kv, 10, 2, {}});
  (void)*d.next_step();
  (void)*d.complete_step();
  ASSERT_EQ(d.pool().used_blocks(), 3);
  ASSERT_EQ(d.num_running(), 1);
  // WHEN it is aborted THEN its blocks are free, it does not run, and the KV arrival is refused
  ASSERT_TRUE(d.abort(pull).has_value());
  EXPECT_EQ(d.pool().used_blocks(), 0);
  EXPECT_EQ(d.num_running(), 0);
  EXPECT_EQ(d.remote_kv_ready(pull).error(), SchedErrc::not_found);
  EXPECT_EQ(d.stats().aborted, 1);
  abort_test::expect_sound(d);

  // GIVEN a prefill worker holding a finished prefill_only request's blocks
  auto pc = test::small_config(16, 4, 64);
  pc.role = WorkerRole::prefill;
  auto p = *Scheduler::create(pc, test::cost_model());
  const SeqHandle held = *p.submit({1, RequestKind::prefill_only, 10, 1, {}});
  drain(p);
  ASSERT_EQ(p.num_held(), 1);
  // WHEN it is aborted THEN it is released like release_held(), and not counted as aborted
  ASSERT_TRUE(p.abort(held).has_value());
  EXPECT_EQ(p.num_held(), 0);
  EXPECT_EQ(p.pool().used_blocks(), 0);
  EXPECT_EQ(p.stats().aborted, 0);
  EXPECT_EQ(p.release_held(held).error(), SchedErrc::not_found);
  abort_test::expect_sound(p);
}

TEST(SchedulerAbort, SeededRandomMixKeepsTheInvariants) {
  // GIVEN a small pool (preemption is frequent), shared prefixes, and a seeded stream of submits,
  // steps and aborts (some between next_step and complete_step)
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto s = *Scheduler::create(test::small_config(24, 6, 24), test::cost_model());
    std::vector<std::vector<BlockHash>> chains;
    for (std::uint64_t c = 0; c < 4; ++c) chains.push_back(abort_test::chain(c + 1, 12));
    std::map<std::uint64_t, SeqHandle> live;  // id -> handle, until finished or aborted
    std::map<std::uint64_t, bool> gone;       // finished or aborted
    std::uint64_t next_id = 1;
    std::int64_t aborts = 0, finishes = 0;
    auto abort_one = [&]() {
      if (live.empty()) return;
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(s.abort(it->second).has_value()) << "seed " << seed << " id " << it->first;
      gone[it->first] = true;
      live.erase(it);
      ++aborts;
    };
    for (int step = 0; step < 400; ++step) {
      const std::uint32_t r = rng() % 10;
      if (r < 4) {
        const int prompt = 1 + static_cast<int>(rng() % 20);
        const int output = 1 + static_cast<int>(rng() % 20);
        SchedRequest req{next_id, RequestKind::full, prompt, output, chains[rng() % chains.size()]};
        auto h = s.submit(req);
        if (h) live[next_id] = *h;
        ++next_id;
      } else if (r < 5) {
        abort_one();
      }
      auto plan = s.next_step();
      ASSERT_TRUE(plan.has_value());
      if (rng() % 4 == 0) abort_one();  // mid-plan
      abort_test::expect_sound(s);
      auto done = s.complete_step();
      ASSERT_TRUE(done.has_value());
      for (const SchedEvent& e : *done) {
        // THEN no event names an aborted (or finished) request
        ASSERT_FALSE(gone.count(e.id)) << "seed " << seed << ": event for retired request " << e.id;
        if (e.kind == SchedEventKind::finished) {
          gone[e.id] = true;
          live.erase(e.id);
          ++finishes;
        }
      }
      abort_test::expect_sound(s);
    }
    // AND aborting what is left frees every block; the counters add up
    while (!live.empty()) abort_one();
    EXPECT_EQ(s.num_unfinished(), 0);
    EXPECT_EQ(s.pool().used_blocks(), 0) << "seed " << seed;
    EXPECT_EQ(s.stats().aborted, aborts);
    EXPECT_EQ(s.stats().finished, finishes);
    EXPECT_FALSE(s.has_work());
    abort_test::expect_sound(s);
  }
}

}  // namespace
}  // namespace disagg

namespace disagg {
namespace {

// vLLM V0 scheduling (no chunked prefill): prompts run whole, first, and never share a step with decodes.
TEST(SchedulerNoChunkedPrefill, PromptsRunWholeAndAloneWhileDecodesWait) {
  // GIVEN a budget of 8 tokens, one sequence decoding, then a 20-token prompt arriving
  SchedulerConfig c = test::small_config(64, 4, 8);
  c.chunked_prefill = false;
  auto s = *Scheduler::create(c, test::cost_model());
  std::vector<BlockHash> none;
  ASSERT_TRUE(s.submit({1, RequestKind::full, 6, 5, none}).has_value());
  const StepPlan* first = *s.next_step();
  EXPECT_EQ(first->batch.prefill_tokens, 6);
  (void)s.complete_step();
  ASSERT_TRUE(s.submit({2, RequestKind::full, 20, 2, none}).has_value());
  // WHEN the next step is planned
  const StepPlan* p = *s.next_step();
  // THEN it is the whole prompt beyond the budget (it is the step's first) and no decode
  EXPECT_EQ(p->batch.prefill_tokens, 20);
  EXPECT_EQ(p->batch.decode_sequences, 0);
  (void)s.complete_step();
  // AND with nothing waiting, both decode together
  const StepPlan* d = *s.next_step();
  EXPECT_EQ(d->batch.prefill_tokens, 0);
  EXPECT_EQ(d->batch.decode_sequences, 2);
  (void)s.complete_step();
  ASSERT_TRUE(s.check_invariants().has_value());
}

TEST(SchedulerNoChunkedPrefill, PromptsThatDoNotFitTogetherWaitForTheNextStep) {
  // GIVEN a budget of 8 and prompts of 5, 5 and 3 tokens
  SchedulerConfig c = test::small_config(64, 4, 8);
  c.chunked_prefill = false;
  auto s = *Scheduler::create(c, test::cost_model());
  std::vector<BlockHash> none;
  for (std::uint64_t id = 0; id < 3; ++id) {
    ASSERT_TRUE(s.submit({id, RequestKind::full, id == 2 ? 3 : 5, 1, none}).has_value());
  }
  // WHEN planned THEN the second prompt is not chunked: the first step runs 5 tokens, the next 5 + 3
  EXPECT_EQ((*s.next_step())->batch.prefill_tokens, 5);
  (void)s.complete_step();
  EXPECT_EQ((*s.next_step())->batch.prefill_tokens, 8);
  (void)s.complete_step();
  // AND every request finishes, with no block leaked
  const auto events = drain(s);
  (void)events;
  EXPECT_EQ(s.num_unfinished(), 0);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(SchedulerNoChunkedPrefill, RandomStreamsKeepTheInvariants) {
  // GIVEN seeded random arrivals into a small pool (preemptions happen), V0 scheduling
  for (std::uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed);
    SchedulerConfig c = test::small_config(48, 6, 16);
    c.chunked_prefill = false;
    auto s = *Scheduler::create(c, test::cost_model());
    std::vector<BlockHash> none;
    std::uniform_int_distribution<int> prompt(1, 40), output(1, 12), coin(0, 3);
    int submitted = 0, finished = 0;
    for (int step = 0; step < 600; ++step) {
      if (coin(rng) == 0 && submitted < 150) {
        if (s.submit({static_cast<std::uint64_t>(submitted), RequestKind::full, prompt(rng), output(rng), none}))
          ++submitted;
      }
      (void)*s.next_step();
      const auto done = s.complete_step();
      ASSERT_TRUE(done.has_value());
      for (const SchedEvent& e : *done) finished += e.kind == SchedEventKind::finished;
      ASSERT_TRUE(s.check_invariants().has_value()) << "seed " << seed << " step " << step;
    }
    for (const SchedEvent& e : drain(s)) finished += e.kind == SchedEventKind::finished;
    // THEN every request finished exactly once and every block is free again
    EXPECT_EQ(finished, submitted) << "seed " << seed;
    EXPECT_EQ(s.pool().used_blocks(), 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace disagg

namespace disagg {
namespace {

// Async scheduling (vLLM --async-scheduling): the plan of step k+1 was made when step k launched.
struct AsyncCase {
  bool async_scheduling;
  std::vector<int> admitted_in_plan;  // plans (1-based, after the submit) that admit the newcomer
};

class SchedulerAsync : public ::testing::TestWithParam<AsyncCase> {};

TEST_P(SchedulerAsync, ARequestArrivingDuringAStepMissesThePlanMadeBeforeIt) {
  // GIVEN one sequence decoding, and a second submitted while a step is in flight
  SchedulerConfig c = test::small_config(64, 4, 8);
  c.async_scheduling = GetParam().async_scheduling;
  auto s = *Scheduler::create(c, test::cost_model());
  std::vector<BlockHash> none;
  ASSERT_TRUE(s.submit({1, RequestKind::full, 4, 20, none}).has_value());
  (void)*s.next_step();
  ASSERT_TRUE(s.submit({2, RequestKind::full, 4, 2, none}).has_value());
  (void)s.complete_step();
  // WHEN the next plans are made
  std::vector<int> admitted;
  for (int plan = 1; plan <= 3; ++plan) {
    const StepPlan* p = *s.next_step();
    for (const SchedEvent& e : p->events) {
      if (e.kind == SchedEventKind::admitted && e.id == 2) admitted.push_back(plan);
    }
    (void)s.complete_step();
  }
  // THEN async: the plan right after the step belongs to the decode alone, the newcomer joins the next
  EXPECT_EQ(admitted, GetParam().admitted_in_plan);
  EXPECT_TRUE(s.check_invariants().has_value());
}

INSTANTIATE_TEST_SUITE_P(Modes, SchedulerAsync, ::testing::Values(AsyncCase{true, {2}}, AsyncCase{false, {1}}),
                         [](const auto& param_info) { return param_info.param.async_scheduling ? "Async" : "Sync"; });

TEST(SchedulerAsyncIdle, AnIdleEngineTakesTheNewcomerAtOnce) {
  // GIVEN a step in flight whose only sequence finishes in it, and a request submitted meanwhile
  auto s = *Scheduler::create(test::small_config(64, 4, 8), test::cost_model());
  std::vector<BlockHash> none;
  ASSERT_TRUE(s.submit({1, RequestKind::full, 4, 1, none}).has_value());
  (void)*s.next_step();
  ASSERT_TRUE(s.submit({2, RequestKind::full, 4, 1, none}).has_value());
  (void)s.complete_step();
  // WHEN the next plan is made THEN it admits the newcomer: nothing else would run in it
  const StepPlan* p = *s.next_step();
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].id, 2u);
  (void)s.complete_step();
}

TEST(SchedulerAsyncIdle, AbortingADeferredSequenceKeepsTheQueueSound) {
  // GIVEN two sequences submitted during a step, the first of them aborted before the next plan
  auto s = *Scheduler::create(test::small_config(64, 4, 8), test::cost_model());
  std::vector<BlockHash> none;
  ASSERT_TRUE(s.submit({1, RequestKind::full, 4, 20, none}).has_value());
  (void)*s.next_step();
  const SeqHandle a = *s.submit({2, RequestKind::full, 4, 2, none});
  ASSERT_TRUE(s.submit({3, RequestKind::full, 4, 2, none}).has_value());
  ASSERT_TRUE(s.abort(a).has_value());
  (void)s.complete_step();
  // WHEN two plans are made THEN the survivor is held once, then admitted
  EXPECT_TRUE((*s.next_step())->events.empty());
  (void)s.complete_step();
  const StepPlan* p = *s.next_step();
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].id, 3u);
  (void)s.complete_step();
  EXPECT_TRUE(s.check_invariants().has_value());
}

}  // namespace
}  // namespace disagg
