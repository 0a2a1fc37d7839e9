#include "kv_event_publisher.h"

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

// A struct's header: an array of its fields (an event's tag first) or a map of as many entries.
void pack_struct(Packer& pk, KvEventEncoding enc, std::size_t entries) {
  const auto n = static_cast<std::uint32_t>(entries);
  if (enc == KvEventEncoding::map_like) pk.pack_map(n);
  else pk.pack_array(n);
}

// A field's key (map-like only); the value follows.
void pack_key(Packer& pk, KvEventEncoding enc, std::string_view name) {
  if (enc == KvEventEncoding::map_like) pack_str(pk, name);
}

// An event's tag: first element (array-like) or the "type" entry (map-like).
void pack_tag(Packer& pk, KvEventEncoding enc, KvEventKind kind) {
  pack_key(pk, enc, kv_wire::kTypeKey);
  pack_str(pk, kv_wire::tag_name(kind));
}

// Every event is written with the fields the wire module declares for its tag, in its order.
// extra_keys of a LoRA or salted store: per block (lora_name) and, on the first block of a
// sequence, (lora_name, cache_salt) or (cache_salt), as generate_block_hash_extra_keys orders them.
void pack_extra_keys(Packer& pk, const KvEvent& e) {
  pk.pack_array(static_cast<std::uint32_t>(e.block_hashes.size()));
  for (std::size_t j = 0; j < e.block_hashes.size(); ++j) {
    const bool salt = j == 0 && !e.cache_salt.empty();
    const std::size_t n = (e.lora_name.empty() ? 0 : 1) + (salt ? 1 : 0);
    if (n == 0) {
      pk.pack_nil();
      continue;
    }
    pk.pack_array(static_cast<std::uint32_t>(n));
    if (!e.lora_name.empty()) pack_str(pk, e.lora_name);
    if (salt) pack_str(pk, e.cache_salt);
  }
}

void pack_event(Packer& pk, const KvEvent& e, KvEventEncoding enc) {
  using kv_wire::RemovedField;
  using kv_wire::StoredField;
  switch (e.kind) {
    case KvEventKind::block_stored: {
      // extra_keys is a defaulted field: written (after the declared ones) only when a block has some.
      const bool extras = !e.lora_name.empty() || !e.cache_salt.empty();
      pack_struct(pk, enc, 1 + kv_wire::kStoredFields.size() + (extras ? 1 : 0));
      pack_tag(pk, enc, e.kind);
      static_assert(kv_wire::kStoredFieldsAll[kv_wire::kStoredFields.size()] == StoredField::extra_keys);
      for (StoredField f : kv_wire::kStoredFields) {
        pack_key(pk, enc, kv_wire::field_name(f));
        switch (f) {
          case StoredField::block_hashes: pack_hashes(pk, e.block_hashes); break;
          case StoredField::parent_block_hash:
            if (e.parent_block_hash) pk.pack_uint64(*e.parent_block_hash);
            else pk.pack_nil();
            break;
          case StoredField::token_ids:
            pk.pack_array(static_cast<std::uint32_t>(e.token_ids.size()));
            for (TokenId t : e.token_ids) pk.pack_int32(t);
            break;
          case StoredField::block_size: pk.pack_int32(e.block_size); break;
          case StoredField::medium: pack_str(pk, kv_wire::kMediumGpu); break;
          case StoredField::lora_id:
            if (e.lora_name.empty()) pk.pack_nil();
            else pk.pack_int32(e.lora_id);
            break;
          case StoredField::lora_name:
            if (e.lora_name.empty()) pk.pack_nil();
            else pack_str(pk, e.lora_name);
            break;
          case StoredField::extra_keys:
          case StoredField::group_idx:
          case StoredField::kv_cache_spec_kind:
          case StoredField::kv_cache_spec_sliding_window:
          case StoredField::locality: pk.pack_nil(); break;
        }
      }
      if (extras) {
        pack_key(pk, enc, kv_wire::field_name(StoredField::extra_keys));
        pack_extra_keys(pk, e);
      }
      break;
    }
    case KvEventKind::block_removed:
      pack_struct(pk, enc, 1 + kv_wire::kRemovedFields.size());
      pack_tag(pk, enc, e.kind);
      for (RemovedField f : kv_wire::kRemovedFields) {
        pack_key(pk, enc, kv_wire::field_name(f));
        switch (f) {
          case RemovedField::block_hashes: pack_hashes(pk, e.block_hashes); break;
          case RemovedField::medium: pack_str(pk, kv_wire::kMediumGpu); break;
          case RemovedField::group_idx:
          case RemovedField::locality: pk.pack_nil(); break;
        }
      }
      break;
    case KvEventKind::all_blocks_cleared:
      pack_struct(pk, enc, 1);
      pack_tag(pk, enc, e.kind);
      break;
  }
}

}  // namespace

std::string encode_event_batch(double ts, std::span<const KvEvent> events, std::int32_t data_parallel_rank,
                               KvEventEncoding batch, KvEventEncoding events_encoding) {
  using kv_wire::BatchField;
  msgpack::sbuffer buf;
  Packer pk(buf);
  pack_struct(pk, batch, kv_wire::kBatchFields.size());
  for (BatchField f : kv_wire::kBatchFields) {
    pack_key(pk, batch, kv_wire::field_name(f));
    switch (f) {
      case BatchField::ts: pk.pack_double(ts); break;
      case BatchField::events:
        pk.pack_array(static_cast<std::uint32_t>(events.size()));
        for (const KvEvent& e : events) pack_event(pk, e, events_encoding);
        break;
      case BatchField::data_parallel_rank: pk.pack_int32(data_parallel_rank); break;
    }
  }
  return std::string(buf.data(), buf.size());
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

Expected<std::unique_ptr<KvEventPublisher>, std::string> KvEventPublisher::create(KvEventPublisherOptions options) {
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(std::move(options)));
  try {
    p->impl_->pub.set(zmq::sockopt::sndhwm, p->options_.hwm);
    p->impl_->pub.set(zmq::sockopt::linger, 0);
    p->impl_->pub.bind(p->options_.endpoint);
    if (!p->options_.replay_endpoint.empty()) {
      p->impl_->replay.emplace(p->impl_->ctx, zmq::socket_type::router);
      p->impl_->replay->set(zmq::sockopt::linger, 0);
      // vLLM's replay ROUTER keeps ZMQ's defaults, and Python sends its answer slowly enough for
      // ZMQ's I/O thread to keep up; this loop is C++ and would outrun it, and a ROUTER drops what
      // exceeds the high-water mark (1,000). So wait for room instead (mandatory routing: a send
      // blocks, up to 1 s, rather than drop), and every buffered batch goes out as vLLM's do.
      p->impl_->replay->set(zmq::sockopt::router_mandatory, 1);
      p->impl_->replay->set(zmq::sockopt::sndtimeo, 1000);
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

KvEventPublisher::~KvEventPublisher() {
  stop();
}

void KvEventPublisher::publish(std::vector<KvEvent> events) {
  if (events.empty()) return;
  const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
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
        using Request = kv_wire::ReplayRequestFrame;
        if (frames.size() != Request::count) continue;
        const auto start = kv_wire::decode_seq(frames[Request::start].to_string_view());
        if (!start) continue;
        const std::string identity = frames[Request::identity].to_string();
        // Each answer: [identity] + ReplayReplyFrame's ["", seq, payload] (ReplayReplyTopicFrame's
        // ["", topic, seq, payload] since vLLM 0.26); then the end marker (its topic empty).
        const bool with_topic = options_.release.replay == kv_wire::ReplayFraming::topic_seq_payload;
        // False when the requester is gone or does not read for 1 s: the rest of the answer is dropped.
        auto answer = [&](std::string_view topic, std::int64_t seq, std::string_view payload) {
          try {
            if (!im.replay->send(zmq::buffer(identity), zmq::send_flags::sndmore)) return false;
            im.replay->send(zmq::message_t(), zmq::send_flags::sndmore);
            if (with_topic) im.replay->send(zmq::buffer(topic), zmq::send_flags::sndmore);
            im.replay->send(zmq::buffer(encode_seq(seq)), zmq::send_flags::sndmore);
            im.replay->send(zmq::buffer(payload), zmq::send_flags::none);
            return true;
          } catch (const zmq::error_t&) {  // EHOSTUNREACH: the requester left
            return false;
          }
        };
        bool ok = true;
        for (const auto& [seq, payload] : im.buffer) {
          if (seq >= *start && !(ok = answer(options_.topic, seq, payload))) break;
        }
        if (ok) answer("", kv_wire::kReplayEndSeq, "");
      }
    }
    bool stop_now = false;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(im.replay ? 5 : 100), [&] { return !queue_.empty() || stopping_; });
      batch.swap(queue_);
      stop_now = stopping_;
    }
    for (auto& [ts, events] : batch) {
      std::string payload = encode_event_batch(ts, events, options_.data_parallel_rank, options_.release);
      const std::int64_t seq = im.next_seq++;
      try {  // kv_wire::PublishFrame: [topic, seq, payload]
        im.pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore);
        im.pub.send(zmq::buffer(encode_seq(seq)), zmq::send_flags::sndmore);
        im.pub.send(zmq::buffer(payload), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) { dropped_.fetch_add(1, std::memory_order_relaxed); }
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
