// The KV event subscriber over real ZMQ sockets: in-order batches reach the sink; a sequence gap
// is filled from the publisher's replay socket; without replay (or when the replay does not reach
// back) the endpoint is cleared; a sequence that restarts clears it too. A new subscription first
// replays the publisher's whole buffer (a warm start), or resumes after a peer snapshot's sequence.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "kv_event_subscriber.h"
#include "msgpack_writer.h"

namespace disagg::router {
namespace {

using testing::Writer;

std::string seq8(std::int64_t seq) {
  std::string out(8, '\0');
  auto v = static_cast<std::uint64_t>(seq);
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

// A batch storing one block whose hash is the sequence number (so the sink sees which arrived).
std::string batch_for(std::int64_t seq) {
  Writer w;
  w.array(3).f64(1.0).array(1).array(2).str("BlockStored").array(1).u64(static_cast<std::uint64_t>(1000 + seq)).u64(0);
  return w.bytes();
}

struct RecordingSink final : KvEventSink {
  std::mutex mu;
  std::vector<std::string> log;  // "s<hash>" per stored hash, "clear:<why>"
  void on_kv_batch(EndpointId, std::uint32_t, const KvEventBatch& b) override {
    std::lock_guard lock(mu);
    for (const auto& e : b.events) {
      for (BlockHash h : b.hashes_of(e)) {
        std::string entry = "s";  // appended, not operator+ (a g++ 12 -Wrestrict false positive)
        entry += std::to_string(h - 1000);
        log.push_back(entry);
      }
    }
  }
  void on_kv_clear(EndpointId, std::uint32_t, std::string_view why) override {
    std::lock_guard lock(mu);
    std::string entry = "clear:";
    entry += why;
    log.push_back(entry);
  }
  std::vector<std::string> wait_for(std::size_t n) {
    for (int i = 0; i < 300; ++i) {
      {
        std::lock_guard lock(mu);
        if (log.size() >= n) return log;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard lock(mu);
    return log;
  }
};

class Publisher {
 public:
  explicit Publisher(bool with_replay) : pub_(ctx_, zmq::socket_type::pub) {
    pub_.set(zmq::sockopt::linger, 0);
    pub_.bind("tcp://127.0.0.1:*");
    endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
    if (with_replay) {
      replay_.emplace(ctx_, zmq::socket_type::router);
      replay_->set(zmq::sockopt::linger, 0);
      replay_->bind("tcp://127.0.0.1:*");
      replay_endpoint_ = replay_->get(zmq::sockopt::last_endpoint);
    }
  }
  void send(std::int64_t seq) {
    const std::string s = seq8(seq), b = batch_for(seq);
    pub_.send(zmq::buffer(std::string("kv@test")), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(s), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(b), zmq::send_flags::none);
  }
  // Answers one replay request with batches [from, to] (or nothing when from > to), then the end,
  // framed as vLLM before 0.26 (["", seq, payload], end ["", -1, ""]) or, `with_topic`, as vLLM
  // 0.26 frames them (PR #45177: ["", topic, seq, payload], end ["", "", -1, ""]). `junk`: answers
  // of neither form sent first (each a list of frames after the identity).
  // `skip`: batches left out (lost on the way); `end`: false leaves the end marker out (an answer cut short).
  void serve_replay(std::int64_t from, std::int64_t to, bool with_topic = false,
                    const std::vector<std::vector<std::string>>& junk = {}, const std::set<std::int64_t>& skip = {},
                    bool end = true) {
    zmq::message_t id, empty, start;
    ASSERT_TRUE(replay_->recv(id));
    ASSERT_TRUE(replay_->recv(empty));
    ASSERT_TRUE(replay_->recv(start));
    auto send = [&](const std::vector<std::string>& frames) {
      replay_->send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore);
      for (std::size_t i = 0; i < frames.size(); ++i) {
        replay_->send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    };
    for (const auto& frames : junk) send(frames);
    for (std::int64_t s = from; s <= to; ++s) {
      if (skip.count(s) != 0) continue;
      if (with_topic) send({"", "kv@test", seq8(s), batch_for(s)});
      else send({"", seq8(s), batch_for(s)});
    }
    if (!end) return;
    if (with_topic) send({"", "", seq8(-1), ""});
    else send({"", seq8(-1), ""});
  }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t pub_;
  std::optional<zmq::socket_t> replay_;
  std::string endpoint_, replay_endpoint_;
};

// Sends start, start + 1, ... until the subscriber has received one (PUB drops messages before
// the connection is up); returns the last number sent.
std::int64_t send_until_seen(Publisher& p, RecordingSink& sink, std::int64_t start) {
  std::int64_t seq = start;
  for (int i = 0; i < 200; ++i, ++seq) {
    p.send(seq);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard lock(sink.mu);
    if (!sink.log.empty()) return seq;
  }
  return seq;
}

std::string s_(std::int64_t seq) {
  std::string out = "s";
  out += std::to_string(seq);
  return out;
}

// Waits until `entry` is the sink's last entry; returns the log.
std::vector<std::string> wait_last(RecordingSink& sink, const std::string& entry) {
  for (int i = 0; i < 300; ++i) {
    {
      std::lock_guard lock(sink.mu);
      if (!sink.log.empty() && sink.log.back() == entry) return sink.log;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::lock_guard lock(sink.mu);
  return sink.log;
}

TEST(KvEventSubscriber, GapIsFilledByReplay) {
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvEventSubscriber sub(sink, metrics, KvSubscriberOptions{});
  sub.start();
  sub.add(3, 1, pub.endpoint(), pub.replay_endpoint(), "kv@");
  pub.serve_replay(1, 0);  // the warm-start replay: an empty buffer
  // GIVEN batches up to L + 1 received in order
  const std::int64_t l = send_until_seen(pub, sink, 0);
  pub.send(l + 1);
  wait_last(sink, s_(l + 1));
  // WHEN L + 5 arrives (L + 2 .. L + 4 lost) and the publisher replays L + 2 .. L + 5
  pub.send(l + 5);
  std::thread replayer([&] { pub.serve_replay(l + 2, l + 5); });
  replayer.join();
  pub.send(l + 6);
  // THEN the sink sees L + 2 .. L + 6 once each, in order; nothing was cleared
  const auto log = wait_last(sink, s_(l + 6));
  ASSERT_GE(log.size(), 6u);
  const std::vector<std::string> tail(log.end() - 6, log.end());
  EXPECT_EQ(tail, (std::vector<std::string>{s_(l + 1), s_(l + 2), s_(l + 3), s_(l + 4), s_(l + 5), s_(l + 6)}))
      << ::testing::PrintToString(log);
  for (const auto& e : log) EXPECT_EQ(e.rfind("clear:", 0), std::string::npos);
  EXPECT_EQ(metrics.kv_gaps.load(), 1u);
  EXPECT_EQ(metrics.kv_replays.load(), 1u);
  sub.stop();
}

TEST(KvEventSubscriber, GapIsFilledByAReplayFramedAsVllm026AndMalformedAnswersAreSkipped) {
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvSubscriberOptions options;
  options.replay_timeout_ms = 3'000;
  KvEventSubscriber sub(sink, metrics, options);
  sub.start();
  sub.add(2, 1, pub.endpoint(), pub.replay_endpoint(), "kv@");
  pub.serve_replay(1, 0);  // the warm-start replay: an empty buffer
  const std::int64_t l = send_until_seen(pub, sink, 0);
  wait_last(sink, s_(l));
  // WHEN L + 4 arrives (L + 1 .. L + 3 lost) and the publisher answers as vLLM 0.26 does, after
  // answers of neither framing (2 and 5 frames, a non-empty delimiter, a 4-byte sequence)
  pub.send(l + 4);
  std::thread replayer([&] {
    pub.serve_replay(l + 1, l + 4, /*with_topic=*/true,
                     {{"", seq8(l + 1)},
                      {"", "kv@test", seq8(l + 1), batch_for(l + 1), "x"},
                      {"x", "kv@test", seq8(l + 1), batch_for(l + 1)},
                      {"", "kv@test", "1234", batch_for(l + 1)}});
  });
  replayer.join();
  pub.send(l + 5);
  // THEN L + 1 .. L + 5 arrive once each, in order, nothing is cleared, and the four malformed
  // answers were counted and skipped
  const auto log = wait_last(sink, s_(l + 5));
  ASSERT_GE(log.size(), 6u);
  const std::vector<std::string> tail(log.end() - 6, log.end());
  EXPECT_EQ(tail, (std::vector<std::string>{s_(l), s_(l + 1), s_(l + 2), s_(l + 3), s_(l + 4), s_(l + 5)}))
      << ::testing::PrintToString(log);
  for (const auto& e : log) EXPECT_EQ(e.rfind("clear:", 0), std::string::npos) << e;
  EXPECT_EQ(metrics.kv_replays.load(), 1u);
  EXPECT_EQ(metrics.kv_replay_malformed.load(), 4u);
  // AND a later gap answered in the older framing by the same publisher is filled as well
  pub.send(l + 7);
  std::thread again([&] { pub.serve_replay(l + 6, l + 7); });
  again.join();
  const auto log2 = wait_last(sink, s_(l + 7));
  ASSERT_GE(log2.size(), 2u);
  EXPECT_EQ(log2[log2.size() - 2], s_(l + 6)) << ::testing::PrintToString(log2);
  EXPECT_EQ(metrics.kv_replays.load(), 2u);
  sub.stop();
}

TEST(KvEventSubscriber, GapWithoutReplayOrShortReplayClears) {
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvEventSubscriber sub(sink, metrics, KvSubscriberOptions{});
  sub.start();
  sub.add(0, 1, pub.endpoint(), pub.replay_endpoint(), "");
  pub.serve_replay(1, 0);  // the warm-start replay: an empty buffer
  const std::int64_t l = send_until_seen(pub, sink, 0);
  wait_last(sink, s_(l));
  // WHEN L + 4 arrives and the replay buffer only reaches back to L + 3
  pub.send(l + 4);
  std::thread replayer([&] { pub.serve_replay(l + 3, l + 4); });
  replayer.join();
  // THEN the endpoint is cleared before L + 3 and L + 4 are applied
  auto log = wait_last(sink, s_(l + 4));
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[log.size() - 3], "clear:replay did not reach back to the gap") << ::testing::PrintToString(log);
  EXPECT_EQ(log[log.size() - 2], s_(l + 3));
  EXPECT_EQ(metrics.kv_replay_holes.load(), 1u);
  // AND a sequence that starts over (publisher restart) clears and applies
  pub.send(0);
  log = wait_last(sink, s_(0));
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[log.size() - 2], "clear:publisher restarted");
  EXPECT_EQ(metrics.kv_restarts.load(), 1u);
  sub.stop();

  // AND without a replay socket a gap clears at once
  RecordingSink sink2;
  RouterMetrics metrics2;
  Publisher plain(/*with_replay=*/false);
  KvEventSubscriber sub2(sink2, metrics2, KvSubscriberOptions{});
  sub2.start();
  sub2.add(1, 1, plain.endpoint(), "", "");
  const std::int64_t l2 = send_until_seen(plain, sink2, 7);
  wait_last(sink2, s_(l2));
  plain.send(l2 + 2);
  const auto log2 = wait_last(sink2, s_(l2 + 2));
  ASSERT_GE(log2.size(), 2u);
  EXPECT_EQ(log2[log2.size() - 2], "clear:sequence gap");
  EXPECT_EQ(metrics2.kv_gaps.load(), 1u);
  sub2.stop();
}

TEST(KvEventSubscriber, ANewSubscriptionReplaysThePublishersWholeBufferFirst) {
  // GIVEN a publisher whose replay buffer holds batches 5..9 (older ones dropped)
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvEventSubscriber sub(sink, metrics, KvSubscriberOptions{});
  sub.start();
  // WHEN a router subscribes (it starts, or discovers the endpoint)
  sub.add(4, 1, pub.endpoint(), pub.replay_endpoint(), "kv@");
  pub.serve_replay(5, 9);
  // THEN it applies the whole buffer at once, in order, clearing nothing although it does not start at 0
  auto log = sink.wait_for(5);
  ASSERT_GE(log.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + 5),
            (std::vector<std::string>{s_(5), s_(6), s_(7), s_(8), s_(9)}));
  EXPECT_EQ(metrics.kv_warm_replays.load(), 1u);
  EXPECT_EQ(metrics.kv_warm_replay_blocks.load(), 5u);
  EXPECT_EQ(metrics.kv_replays.load(), 0u);
  // AND live batches it already replayed are dropped as duplicates, the next ones applied once
  for (int i = 0; i < 100; ++i) {
    pub.send(9);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pub.send(10);
  log = wait_last(sink, s_(10));
  ASSERT_EQ(log.size(), 6u) << ::testing::PrintToString(log);
  EXPECT_EQ(log.back(), s_(10));
}

TEST(KvEventSubscriber, ASubscriptionResumedFromAPeerSnapshotReplaysOnlyWhatFollows) {
  // GIVEN a peer snapshot whose entries reach batch 6 of a publisher whose buffer holds 3..8
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvEventSubscriber sub(sink, metrics, KvSubscriberOptions{});
  sub.start();
  // WHEN the router subscribes resuming after 6 (the publisher answers from the start it was asked)
  sub.add(4, 1, pub.endpoint(), pub.replay_endpoint(), "kv@", /*resume_seq=*/6);
  pub.serve_replay(7, 8);
  // THEN only 7 and 8 are applied, and nothing is cleared
  const auto log = sink.wait_for(2);
  EXPECT_EQ(log, (std::vector<std::string>{s_(7), s_(8)}));
  EXPECT_EQ(metrics.kv_warm_replays.load(), 1u);
}

TEST(KvEventSubscriber, ResumedWithoutReplayKeepsTheSnapshotAtTheFirstGap) {
  // GIVEN a subscription resumed after batch 6 of a publisher without a replay socket
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher plain(/*with_replay=*/false);
  KvEventSubscriber sub(sink, metrics, KvSubscriberOptions{});
  sub.start();
  sub.add(1, 1, plain.endpoint(), "", "", /*resume_seq=*/6);
  // WHEN the first live batch it sees is later than 7 (batches published meanwhile are lost)
  const std::int64_t l = send_until_seen(plain, sink, 20);
  // THEN the entries stay (no clear) and the batch is applied; a later gap clears as usual
  auto log = wait_last(sink, s_(l));
  for (const auto& e : log) EXPECT_EQ(e.rfind("clear:", 0), std::string::npos);
  plain.send(l + 3);
  log = wait_last(sink, s_(l + 3));
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[log.size() - 2], "clear:sequence gap");
}

TEST(KvEventSubscriber, AReplayAnswerWithAHoleClearsThenAppliesWhatItHas) {
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvEventSubscriber sub(sink, metrics, KvSubscriberOptions{});
  sub.start();
  sub.add(3, 1, pub.endpoint(), pub.replay_endpoint(), "kv@");
  pub.serve_replay(1, 0);  // the warm-start replay: an empty buffer
  const std::int64_t l = send_until_seen(pub, sink, 0);
  wait_last(sink, s_(l));
  // WHEN L + 5 arrives (L + 1 .. L + 4 lost) and the replay answer lacks L + 3 (lost on the way:
  // it may have removed blocks the index holds)
  pub.send(l + 5);
  std::thread replayer([&] { pub.serve_replay(l + 1, l + 5, false, {}, {l + 3}); });
  replayer.join();
  // THEN the endpoint is cleared, and the batches the answer has are applied, in order, once
  const auto log = wait_last(sink, s_(l + 5));
  ASSERT_GE(log.size(), 5u);
  const std::vector<std::string> tail(log.end() - 5, log.end());
  EXPECT_EQ(tail,
            (std::vector<std::string>{"clear:replay answer lacks batches", s_(l + 1), s_(l + 2), s_(l + 4), s_(l + 5)}))
      << ::testing::PrintToString(log);
  EXPECT_EQ(metrics.kv_replay_holes.load(), 1u);
  EXPECT_EQ(metrics.kv_replays.load(), 1u);
  // AND the stream goes on in order
  pub.send(l + 6);
  EXPECT_EQ(wait_last(sink, s_(l + 6)).back(), s_(l + 6));
}

TEST(KvEventSubscriber, AnAnswerCutShortIsAppliedAndTheRestIsAskedForAtTheNextGap) {
  // GIVEN a publisher whose warm-start answer brings batches 5..7 and no end marker
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher pub(/*with_replay=*/true);
  KvSubscriberOptions options;
  options.replay_timeout_ms = 200;
  KvEventSubscriber sub(sink, metrics, options);
  sub.start();
  sub.add(4, 1, pub.endpoint(), pub.replay_endpoint(), "kv@");
  pub.serve_replay(5, 7, false, {}, {}, /*end=*/false);
  // THEN once the wait ends they are applied, not discarded
  auto log = sink.wait_for(3);
  EXPECT_EQ(log, (std::vector<std::string>{s_(5), s_(6), s_(7)}));
  EXPECT_EQ(metrics.kv_warm_replays.load(), 1u);
  // WHEN live batch 10 comes THEN 8..9 are asked for from a fresh replay socket, and 8..10 applied
  for (int i = 0; i < 300 && metrics.kv_gaps.load() == 0; ++i) {
    pub.send(10);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::thread replayer([&] { pub.serve_replay(8, 10); });
  replayer.join();
  log = wait_last(sink, s_(10));
  EXPECT_EQ(log, (std::vector<std::string>{s_(5), s_(6), s_(7), s_(8), s_(9), s_(10)}));
  EXPECT_EQ(metrics.kv_replay_holes.load(), 0u);
}

TEST(KvEventSubscriber, AReplaySocketThatNeverAnswersDoesNotHoldOtherEndpoints) {
  // GIVEN a worker whose replay socket never answers (3 s of patience) and a live one
  RecordingSink sink;
  RouterMetrics metrics;
  Publisher dead(/*with_replay=*/true);
  Publisher live(/*with_replay=*/false);
  KvSubscriberOptions options;
  options.replay_timeout_ms = 3'000;
  KvEventSubscriber sub(sink, metrics, options);
  sub.start();
  const auto t0 = std::chrono::steady_clock::now();
  // WHEN both are subscribed, the silent one first
  sub.add(1, 1, dead.endpoint(), dead.replay_endpoint(), "kv@");
  sub.add(2, 1, live.endpoint(), "", "kv@");
  // THEN the live one's batches are applied at once, not after the other's replay wait
  const std::int64_t l = send_until_seen(live, sink, 0);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(waited, std::chrono::milliseconds(1'500));
  live.send(l + 1);
  EXPECT_EQ(wait_last(sink, s_(l + 1)).back(), s_(l + 1));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3'000));
  EXPECT_EQ(metrics.kv_warm_replays.load(), 0u);  // the silent replay is still waiting
}

}  // namespace
}  // namespace disagg::router
