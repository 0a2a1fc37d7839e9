#include "kv_event_subscriber.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <zmq.hpp>

#include "lib/kv_events/kv_event_sequence.h"
#include "lib/kv_events/kv_event_wire.h"

namespace disagg::router {

std::string_view to_string(SeqVerdict verdict) {
  switch (verdict) {
    case SeqVerdict::first: return "first";
    case SeqVerdict::in_order: return "in_order";
    case SeqVerdict::gap: return "gap";
    case SeqVerdict::duplicate: return "duplicate";
    case SeqVerdict::restart: return "restart";
  }
  return "unknown";
}

namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Receives one multipart message without blocking; false when none is waiting.
bool recv_multipart(zmq::socket_t& s, std::vector<std::string>& frames) {
  frames.clear();
  zmq::message_t part;
  while (true) {
    auto got = s.recv(part, frames.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (!got) return !frames.empty();
    frames.emplace_back(static_cast<const char*>(part.data()), part.size());
    if (!part.more()) return true;
    if (frames.size() > 16) {  // not ours: drain the rest
      while (part.more() && s.recv(part, zmq::recv_flags::none)) {}
      return true;
    }
  }
}

void log_warm(const std::string& endpoint, std::string_view how, std::size_t batches) {
  std::fprintf(stderr, "disagg-engine router: KV events of %s: warm start, replayed %zu batches %.*s\n",
               endpoint.c_str(), batches, static_cast<int>(how.size()), how.data());
}

}  // namespace

struct KvEventSubscriber::Impl {
  zmq::context_t ctx{1};
};

// A replay asked and not yet answered in full. The endpoint's live batches wait in its SUB socket's
// queue meanwhile (the socket is not read), so they are applied after the replay, in order; the
// other endpoints' batches keep flowing.
struct KvEventSubscriber::Replay {
  ReplayMode mode = ReplayMode::gap;
  std::int64_t start = 0;
  std::chrono::steady_clock::time_point deadline, hard_deadline;
  std::vector<std::pair<std::int64_t, std::string>> got;
  // The live message that asked for it (a gap, or the first live batch after an unanswered warm
  // start), handled once the replay ends; empty for a warm start.
  std::vector<std::string> held;
  std::int64_t held_seq = -1;
};

struct KvEventSubscriber::Sub {
  EndpointId id = 0;
  std::uint32_t generation = 0;
  std::string endpoint, replay;
  std::optional<zmq::socket_t> socket;
  std::optional<zmq::socket_t> dealer;
  SequenceTracker seq;
  std::optional<Replay> pending;        // at most one replay in flight per endpoint
  bool initial_replay_pending = false;  // the warm-start replay went unanswered: try once more
  bool resumed_without_replay = false;  // resumed from a peer snapshot, nothing filled the gap yet
  bool malformed_logged = false;        // one log line per subscription; the counter counts them all
};

KvEventSubscriber::KvEventSubscriber(KvEventSink& sink, RouterMetrics& metrics, KvSubscriberOptions options)
    : sink_(sink), metrics_(metrics), options_(options), impl_(std::make_unique<Impl>()) {}

KvEventSubscriber::~KvEventSubscriber() {
  stop();
}

void KvEventSubscriber::start() {
  thread_ = std::thread([this] { run(); });
}

void KvEventSubscriber::stop() {
  stopping_.store(true);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventSubscriber::add(EndpointId id, std::uint32_t generation, std::string endpoint, std::string replay,
                            std::string topic_prefix, std::int64_t resume_seq) {
  std::lock_guard lock(mu_);
  commands_.push_back(
      Command{true, id, generation, std::move(endpoint), std::move(replay), std::move(topic_prefix), resume_seq});
  cv_.notify_all();
}

void KvEventSubscriber::remove(EndpointId id) {
  std::lock_guard lock(mu_);
  commands_.push_back(Command{false, id, 0, {}, {}, {}, -1});
  cv_.notify_all();
}

void KvEventSubscriber::apply(Sub& s, std::string_view payload, std::int64_t seq) {
  auto decoded = decode_kv_event_batch(bytes_of(payload), batch_, options_.limits);
  if (!decoded) {
    metrics_.kv_decode_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  batch_.seq = seq;
  sink_.on_kv_batch(s.id, s.generation, batch_);
  metrics_.kv_batches.fetch_add(1, std::memory_order_relaxed);
  for (const KvEventRecord& e : batch_.events) {
    metrics_.kv_events[static_cast<int>(e.type)].fetch_add(1, std::memory_order_relaxed);
    if (counting_warm_ && e.type == KvEventType::block_stored) {
      metrics_.kv_warm_replay_blocks.fetch_add(e.hash_count, std::memory_order_relaxed);
    }
  }
}

void KvEventSubscriber::warm_start(Sub& s, std::int64_t resume_seq) {
  if (resume_seq >= 0) {
    s.seq.accept(resume_seq);
    if (s.replay.empty()) s.resumed_without_replay = true;
    else begin_replay(s, resume_seq + 1, ReplayMode::resume, {}, -1);
    return;
  }
  if (!s.replay.empty()) begin_replay(s, 0, ReplayMode::initial, {}, -1);
}

void KvEventSubscriber::begin_replay(Sub& s, std::int64_t start, ReplayMode mode, std::vector<std::string> held,
                                     std::int64_t held_seq) {
  Replay& r = s.pending.emplace();
  r.mode = mode;
  r.start = start;
  r.held = std::move(held);
  r.held_seq = held_seq;
  // replay_timeout_ms without an answer part ends the wait; a long answer that keeps coming may
  // take up to ten times that.
  const auto now = std::chrono::steady_clock::now();
  r.deadline = now + std::chrono::milliseconds(options_.replay_timeout_ms);
  r.hard_deadline = now + std::chrono::milliseconds(10 * options_.replay_timeout_ms);
  try {
    if (!s.dealer) {
      s.dealer.emplace(impl_->ctx, zmq::socket_type::dealer);
      s.dealer->set(zmq::sockopt::linger, 0);
      // The publisher sends its whole answer at once (vLLM: up to buffer_steps batches, 10,000)
      // and its ROUTER drops what exceeds the pipe's high-water marks (its 1,000 plus ours): make
      // room for a whole buffer here, or a warm start's answer loses batches and its end marker.
      s.dealer->set(zmq::sockopt::rcvhwm, options_.rcvhwm);
      s.dealer->connect(s.replay);
    }
    // The request after the DEALER's (implicit) identity: ["", start seq]. Never blocks: the
    // DEALER queues it until the connection is up.
    const std::string start_bytes = kv_wire::encode_seq(start);
    s.dealer->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    s.dealer->send(zmq::buffer(start_bytes), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    s.dealer.reset();
    finish_replay(s, /*ended=*/false);
  }
}

void KvEventSubscriber::read_replay(Sub& s) {
  Replay& r = *s.pending;
  std::vector<std::string>& frames = replay_frames_;
  bool any = false;
  while (recv_multipart(*s.dealer, frames)) {
    any = true;
    // DEALER strips the identity: ["", seq, payload] before vLLM 0.26, ["", topic, seq, payload]
    // since (kv_event_wire.h); told apart per answer, so a publisher upgraded mid-run is read too.
    const auto reply = kv_wire::parse_replay_reply(frames);
    if (!reply) {
      metrics_.kv_replay_malformed.fetch_add(1, std::memory_order_relaxed);
      if (!s.malformed_logged) {
        s.malformed_logged = true;
        std::fprintf(stderr,
                     "disagg-engine router: a replay answer from %s is neither [\"\", seq, payload] nor "
                     "[\"\", topic, seq, payload] (%zu frames): skipped (counted in "
                     "disagg_router_kv_events_replay_malformed_total)\n",
                     s.replay.c_str(), frames.size());
      }
      continue;
    }
    if (reply->end()) {
      finish_replay(s, /*ended=*/true);
      return;
    }
    if (reply->seq >= r.start && r.got.size() < 1'000'000) r.got.emplace_back(reply->seq, std::string(reply->payload));
  }
  if (any) {
    r.deadline = std::min(r.hard_deadline,
                          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.replay_timeout_ms));
  }
}

std::int64_t KvEventSubscriber::apply_replay(Sub& s, Replay& r) {
  auto& got = r.got;
  // Holes: batches asked for that the answer lacks. At the front when the publisher's buffer no
  // longer reaches back to the start (a warm start from 0 expects that: the buffer starts where it
  // starts, and a resume's empty answer means nothing followed the snapshot); inside, when batches
  // were lost on the way (high-water marks); at the end, when a gap's answer stops short of the live
  // batch that showed the gap. What was lost may hold removals of blocks the index has: clear the
  // endpoint, then apply what is there (its stores are still true).
  const char* hole = nullptr;
  if (r.mode != ReplayMode::initial && (got.empty() ? r.mode == ReplayMode::gap : got.front().first != r.start)) {
    hole = "replay did not reach back to the gap";
  }
  for (std::size_t i = 1; hole == nullptr && i < got.size(); ++i) {
    if (got[i].first > got[i - 1].first + 1) hole = "replay answer lacks batches";
  }
  if (hole == nullptr && r.mode == ReplayMode::gap && !got.empty() && got.back().first < r.held_seq - 1) {
    hole = "replay answer lacks batches";
  }
  if (hole != nullptr) {
    metrics_.kv_replay_holes.fetch_add(1, std::memory_order_relaxed);
    sink_.on_kv_clear(s.id, s.generation, hole);
  }
  // Numbers from the first one applied on, seen again live, are duplicates. (An initial replay
  // starts at the buffer's oldest: a lower number later means a restarted publisher.)
  if (!got.empty()) s.seq.replaying_from(r.mode == ReplayMode::initial ? got.front().first : r.start);
  std::int64_t last = r.start - 1;
  counting_warm_ = r.mode != ReplayMode::gap;
  for (auto& [seq, payload] : got) {
    if (seq <= last) continue;
    apply(s, payload, seq);
    last = seq;
  }
  counting_warm_ = false;
  if (last >= r.start) s.seq.accept(last);
  if (r.mode == ReplayMode::gap) {
    metrics_.kv_replays.fetch_add(1, std::memory_order_relaxed);
  } else {
    metrics_.kv_warm_replays.fetch_add(1, std::memory_order_relaxed);
    log_warm(s.endpoint, r.mode == ReplayMode::initial ? "from the start of its buffer" : "after a peer snapshot",
             got.size());
  }
  return last;
}

void KvEventSubscriber::finish_replay(Sub& s, bool ended) {
  Replay r = std::move(*s.pending);
  s.pending.reset();
  // A late answer would confuse the next replay: start over with a fresh socket.
  if (!ended) s.dealer.reset();
  // An answer cut short (no end marker) still counts for what it brought: the batches after its
  // last show up as a gap at the next live batch, which asks again from there.
  const bool answered = ended || !r.got.empty();
  const std::int64_t last = answered ? apply_replay(s, r) : r.start - 1;
  switch (r.mode) {
    case ReplayMode::resume: s.resumed_without_replay = !answered; return;
    case ReplayMode::initial:
      if (r.held.empty()) {
        s.initial_replay_pending = !answered;
        return;
      }
      // Asked again at the first live batch: that batch now, unless the replay covered it.
      if (answered && last >= r.held_seq) return;
      on_live(s, r.held, r.held_seq);
      return;
    case ReplayMode::gap:
      if (answered && last >= r.held_seq) return;  // the replay covered this batch
      if (!answered) sink_.on_kv_clear(s.id, s.generation, "sequence gap");
      apply(s, r.held[kv_wire::PublishFrame::payload], r.held_seq);
      s.seq.accept(r.held_seq);
      s.resumed_without_replay = false;
      return;
  }
}

void KvEventSubscriber::handle(Sub& s, std::vector<std::string>& frames) {
  if (frames.size() != kv_wire::PublishFrame::count) {
    metrics_.kv_decode_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto seq = kv_wire::decode_seq(frames[kv_wire::PublishFrame::seq]);
  if (!seq) {
    metrics_.kv_decode_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (s.initial_replay_pending) {
    // The warm-start replay went unanswered (the publisher was not up yet): once more, now.
    s.initial_replay_pending = false;
    begin_replay(s, 0, ReplayMode::initial, std::move(frames), *seq);
    return;
  }
  on_live(s, frames, *seq);
}

void KvEventSubscriber::on_live(Sub& s, std::vector<std::string>& frames, std::int64_t seq) {
  switch (s.seq.observe(seq)) {
    case SeqVerdict::duplicate: return;
    case SeqVerdict::restart:
      metrics_.kv_restarts.fetch_add(1, std::memory_order_relaxed);
      sink_.on_kv_clear(s.id, s.generation, "publisher restarted");
      s.seq.reset();
      break;
    case SeqVerdict::gap: {
      metrics_.kv_gaps.fetch_add(1, std::memory_order_relaxed);
      const std::int64_t expected = s.seq.expected();
      if (s.resumed_without_replay) {
        // Resumed from a peer's snapshot with nothing to fill [expected, seq): keep the loaded
        // entries (a block removed meanwhile stays until the index evicts it).
        std::fprintf(stderr,
                     "disagg-engine router: KV events of %s: batches %lld..%lld after the peer snapshot are not "
                     "replayable; keeping the snapshot's entries\n",
                     s.endpoint.c_str(), static_cast<long long>(expected), static_cast<long long>(seq - 1));
        break;
      }
      if (!s.replay.empty()) {
        begin_replay(s, expected, ReplayMode::gap, std::move(frames), seq);
        return;
      }
      sink_.on_kv_clear(s.id, s.generation, "sequence gap");
      break;
    }
    case SeqVerdict::first:
    case SeqVerdict::in_order: break;
  }
  apply(s, frames[kv_wire::PublishFrame::payload], seq);
  s.seq.accept(seq);
  s.resumed_without_replay = false;
}

void KvEventSubscriber::run() {
  std::vector<std::unique_ptr<Sub>> subs;
  std::vector<zmq::pollitem_t> items;
  std::vector<std::string> frames;
  while (!stopping_.load()) {
    std::vector<Command> commands;
    {
      std::unique_lock lock(mu_);
      if (subs.empty() && commands_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_.load() || !commands_.empty(); });
      }
      commands.swap(commands_);
    }
    for (Command& c : commands) {
      std::erase_if(subs, [&](const std::unique_ptr<Sub>& s) { return s->id == c.id; });
      if (!c.add) continue;
      auto s = std::make_unique<Sub>();
      s->id = c.id;
      s->generation = c.generation;
      s->endpoint = c.endpoint;
      s->replay = c.replay;
      try {
        s->socket.emplace(impl_->ctx, zmq::socket_type::sub);
        s->socket->set(zmq::sockopt::linger, 0);
        s->socket->set(zmq::sockopt::rcvhwm, options_.rcvhwm);
        s->socket->set(zmq::sockopt::reconnect_ivl, 100);
        s->socket->set(zmq::sockopt::reconnect_ivl_max, 2000);
        s->socket->set(zmq::sockopt::subscribe, c.topic);
        s->socket->connect(c.endpoint);
      } catch (const zmq::error_t& e) {
        std::fprintf(stderr, "disagg-engine router: cannot subscribe to KV events at %s: %s\n", c.endpoint.c_str(),
                     e.what());
        continue;
      }
      warm_start(*s, c.resume_seq);
      subs.push_back(std::move(s));
    }
    if (subs.empty()) continue;
    // Per endpoint: its replay socket while a replay is in flight (its live batches wait in the SUB
    // socket's queue meanwhile), else its SUB socket. The wait ends at the nearest replay deadline.
    items.clear();
    auto wait = std::chrono::milliseconds(50);
    const auto now = std::chrono::steady_clock::now();
    for (auto& s : subs) {
      if (s->pending) {
        items.push_back(zmq::pollitem_t{s->dealer->handle(), 0, ZMQ_POLLIN, 0});
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(s->pending->deadline - now);
        wait = std::clamp(left, std::chrono::milliseconds(0), wait);
      } else {
        items.push_back(zmq::pollitem_t{s->socket->handle(), 0, ZMQ_POLLIN, 0});
      }
    }
    try {
      const int ready = zmq::poll(items.data(), items.size(), wait);
      for (std::size_t i = 0; i < subs.size(); ++i) {
        Sub& s = *subs[i];
        const bool readable = ready > 0 && (items[i].revents & ZMQ_POLLIN) != 0;
        if (s.pending) {
          if (readable) read_replay(s);
          if (s.pending && std::chrono::steady_clock::now() >= s.pending->deadline) finish_replay(s, /*ended=*/false);
          continue;
        }
        if (!readable) continue;
        // Bounded per turn, so one busy publisher cannot starve the others or the commands; a
        // batch that asks for a replay stops the turn (the ones after it wait for the replay).
        for (int k = 0; k < 256 && !s.pending && recv_multipart(*s.socket, frames); ++k) handle(s, frames);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
    }
  }
}

}  // namespace disagg::router
