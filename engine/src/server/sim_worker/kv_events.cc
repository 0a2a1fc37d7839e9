#include "kv_events.h"

#include <chrono>
#include <msgpack.hpp>
#include <zmq.hpp>

namespace disagg::sim_worker {

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_hashes(Packer& pk, const std::vector<BlockHash>& hashes) {
  pk.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (BlockHash h : hashes) pk.pack_uint64(h);
}

constexpr std::string_view kMedium = "GPU";

void pack_event(Packer& pk, const KvEvent& e, KvEventEncoding enc) {
  const bool map = enc == KvEventEncoding::map_like;
  switch (e.kind) {
    case KvEventKind::block_stored:
      // Field order of vLLM's BlockStored: block_hashes, parent_block_hash, token_ids,
      // block_size, lora_id, medium, lora_name (then defaulted fields, omitted).
      map ? pk.pack_map(8) : pk.pack_array(8);
      if (map) pack_str(pk, "type");
      pack_str(pk, "BlockStored");
      if (map) pack_str(pk, "block_hashes");
      pack_hashes(pk, e.block_hashes);
      if (map) pack_str(pk, "parent_block_hash");
      if (e.parent_block_hash) pk.pack_uint64(*e.parent_block_hash); else pk.pack_nil();
      if (map) pack_str(pk, "token_ids");
      pk.pack_array(static_cast<std::uint32_t>(e.token_ids.size()));
      for (TokenId t : e.token_ids) pk.pack_int32(t);
      if (map) pack_str(pk, "block_size");
      pk.pack_int32(e.block_size);
      if (map) pack_str(pk, "lora_id");
      pk.pack_nil();
      if (map) pack_str(pk, "medium");
      pack_str(pk, kMedium);
      if (map) pack_str(pk, "lora_name");
      pk.pack_nil();
      break;
    case KvEventKind::block_removed:
      map ? pk.pack_map(3) : pk.pack_array(3);
      if (map) pack_str(pk, "type");
      pack_str(pk, "BlockRemoved");
      if (map) pack_str(pk, "block_hashes");
      pack_hashes(pk, e.block_hashes);
      if (map) pack_str(pk, "medium");
      pack_str(pk, kMedium);
      break;
    case KvEventKind::all_blocks_cleared:
      map ? pk.pack_map(1) : pk.pack_array(1);
      if (map) pack_str(pk, "type");
      pack_str(pk, "AllBlocksCleared");
      break;
  }
}

}  // namespace

std::string encode_event_batch(double ts, std::span<const KvEvent> events,
                               std::int32_t data_parallel_rank, KvEventEncoding encoding) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  const bool map = encoding == KvEventEncoding::map_like;
  map ? pk.pack_map(3) : pk.pack_array(3);
  if (map) pack_str(pk, "ts");
  pk.pack_double(ts);
  if (map) pack_str(pk, "events");
  pk.pack_array(static_cast<std::uint32_t>(events.size()));
  for (const KvEvent& e : events) pack_event(pk, e, encoding);
  if (map) pack_str(pk, "data_parallel_rank");
  pk.pack_int32(data_parallel_rank);
  return std::string(buf.data(), buf.size());
}

std::string encode_seq(std::int64_t seq) {
  std::string out(8, '\0');
  auto v = static_cast<std::uint64_t>(seq);
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

struct KvEventPublisher::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
  std::deque<std::pair<std::int64_t, std::string>> buffer;  // (seq, payload) for replay
  std::int64_t next_seq = 0;
};

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

Expected<std::unique_ptr<KvEventPublisher>, std::string> KvEventPublisher::create(
    KvEventPublisherOptions options) {
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(std::move(options)));
  try {
    p->impl_->pub.set(zmq::sockopt::sndhwm, p->options_.hwm);
    p->impl_->pub.set(zmq::sockopt::linger, 0);
    p->impl_->pub.bind(p->options_.endpoint);
    if (!p->options_.replay_endpoint.empty()) {
      p->impl_->replay.emplace(p->impl_->ctx, zmq::socket_type::router);
      p->impl_->replay->set(zmq::sockopt::linger, 0);
      p->impl_->replay->bind(p->options_.replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return unexpected("cannot bind the KV event sockets (" + p->options_.endpoint +
                      (p->options_.replay_endpoint.empty() ? "" : ", " + p->options_.replay_endpoint) +
                      "): " + e.what() + "; pass a free --kv-events-port");
  }
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

KvEventPublisher::~KvEventPublisher() { stop(); }

void KvEventPublisher::publish(std::vector<KvEvent> events) {
  if (events.empty()) return;
  const double ts =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queue) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.emplace_back(ts, std::move(events));
  }
  cv_.notify_one();
}

void KvEventPublisher::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::run() {
  Impl& im = *impl_;
  std::deque<std::pair<double, std::vector<KvEvent>>> batch;
  while (true) {
    if (im.replay) {
      // Serve replay requests between sends; not on the hot path.
      zmq::pollitem_t item{im.replay->handle(), 0, ZMQ_POLLIN, 0};
      while (zmq::poll(&item, 1, std::chrono::milliseconds(0)) > 0) {
        std::vector<zmq::message_t> frames;
        zmq::message_t part;
        while (true) {
          if (!im.replay->recv(part, zmq::recv_flags::dontwait)) break;
          const bool more = part.more();
          frames.push_back(std::move(part));
          if (!more) break;
        }
        if (frames.size() != 3 || frames[2].size() != 8) continue;
        const auto* b = static_cast<const unsigned char*>(frames[2].data());
        std::int64_t start = 0;
        for (int i = 0; i < 8; ++i) start = static_cast<std::int64_t>((static_cast<std::uint64_t>(start) << 8) | b[i]);
        const std::string identity(static_cast<const char*>(frames[0].data()), frames[0].size());
        for (const auto& [seq, payload] : im.buffer) {
          if (seq < start) continue;
          im.replay->send(zmq::buffer(identity), zmq::send_flags::sndmore);
          im.replay->send(zmq::message_t(), zmq::send_flags::sndmore);
          im.replay->send(zmq::buffer(encode_seq(seq)), zmq::send_flags::sndmore);
          im.replay->send(zmq::buffer(payload), zmq::send_flags::none);
        }
        im.replay->send(zmq::buffer(identity), zmq::send_flags::sndmore);
        im.replay->send(zmq::message_t(), zmq::send_flags::sndmore);
        im.replay->send(zmq::buffer(encode_seq(-1)), zmq::send_flags::sndmore);
        im.replay->send(zmq::message_t(), zmq::send_flags::none);
      }
    }
    bool stop_now = false;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(im.replay ? 5 : 100),
                   [&] { return !queue_.empty() || stopping_; });
      batch.swap(queue_);
      stop_now = stopping_;
    }
    for (auto& [ts, events] : batch) {
      std::string payload = encode_event_batch(ts, events, options_.data_parallel_rank,
                                               options_.encoding);
      const std::int64_t seq = im.next_seq++;
      try {
        im.pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore);
        im.pub.send(zmq::buffer(encode_seq(seq)), zmq::send_flags::sndmore);
        im.pub.send(zmq::buffer(payload), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
      }
      published_.fetch_add(1, std::memory_order_relaxed);
      if (im.replay) {
        im.buffer.emplace_back(seq, std::move(payload));
        if (im.buffer.size() > options_.buffer_steps) im.buffer.pop_front();
      }
    }
    batch.clear();
    if (stop_now) break;
  }
}

}  // namespace disagg::sim_worker
