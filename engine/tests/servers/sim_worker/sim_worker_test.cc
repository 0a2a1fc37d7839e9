// Tests of the sim-worker (engine/src/servers/sim_worker): fake tokenizer, KV event encoding
// (decoded back with msgpack-cxx), Prometheus text, and an in-process worker on loopback whose
// KV events are read by a ZMQ subscriber and whose replay socket is queried.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <msgpack.hpp>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "disagg/json_depth.h"
#include "fake_tokenizer.h"
#include "lib/kv_events/kv_event_publisher.h"
#include "prometheus.h"
#include "lib/http/http_client.h"
#include "sim_worker.h"

namespace disagg::sim_worker {
namespace {

using namespace std::chrono_literals;
namespace net = http::net;

// ---- fake tokenizer -------------------------------------------------------------------------

TEST(FakeTokenizer, IsDeterministicAndWhitespaceInsensitive) {
  // GIVEN the same text twice and once with other whitespace
  std::vector<TokenId> a, b, c;
  fake_tokenize("The quick brown fox", a);
  fake_tokenize("The quick brown fox", b);
  fake_tokenize("  The\tquick\n\nbrown   fox ", c);
  // THEN the tokens are equal
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  // AND a word is cut in 4-byte pieces: quick = "quic" + "k", brown = "brow" + "n"
  EXPECT_EQ(a.size(), 6u);
  EXPECT_EQ(a[1], fake_token_id("quic"));
  EXPECT_EQ(a[2], fake_token_id("k"));
  for (TokenId t : a) {
    EXPECT_GE(t, 256);
    EXPECT_LT(t, kFakeVocabSize);
  }
}

TEST(FakeTokenizer, IdsAreStable) {
  // GIVEN texts with every whitespace byte, runs longer than 4 bytes and UTF-8
  // WHEN tokenized THEN the ids are the ones the rule gave when it was written: routers, workers and
  // recorded traces hash these ids, so a faster implementation must not change one of them
  std::vector<TokenId> a, b, c, d;
  fake_tokenize("The quick brown fox", a);
  fake_tokenize("  a\tbc\n\ndefgh   ijklmnopq \f\v r", b);
  fake_tokenize("\xc3\xa9t\xc3\xa9 caf\xc3\xa9!", c);
  fake_tokenize(" \t\n", d);
  EXPECT_EQ(a, (std::vector<TokenId>{86748, 7839, 116362, 35355, 15729, 11406}));
  EXPECT_EQ(b, (std::vector<TokenId>{122252, 52338, 98193, 40151, 95245, 13669, 61628, 34261}));
  EXPECT_EQ(c, (std::vector<TokenId>{29028, 105444, 47738, 8639}));
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(fake_token_id("quic"), a[1]);
}

TEST(FakeTokenizer, MatchesTheRuleOnRandomText) {
  // GIVEN random texts of every length up to 200 over an alphabet heavy in whitespace, control
  // bytes (including 0x08 and 0x0e, either side of \t..\r), high bytes and long runs, and over
  // one of plain words, so that every piece cut occurs in short and long texts
  const std::string mixed = std::string(" \t\n\r\f\v\x01\x08\x0e\x1f\x21\x7f\x80\x89\xa0\xff") + "abcdefgh";
  const std::string sparse = std::string(" ") + "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uint64_t seed = 0x243f6a8885a308d3ULL;
  const auto next = [&seed] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  for (int round = 0; round < 8000; ++round) {
    const std::string& alphabet = round % 2 == 0 ? mixed : sparse;
    std::string text(next() % 201, ' ');
    for (char& c : text) c = alphabet[next() % alphabet.size()];
    // WHEN tokenized, after a token already in the output
    std::vector<TokenId> got = {7};
    fake_tokenize(text, got);
    // THEN the ids are the rule's: split at whitespace, cut runs into 4-byte pieces, id each piece
    std::vector<TokenId> want = {7};
    std::size_t i = 0;
    while (i < text.size()) {
      const auto space = [&](std::size_t k) {
        return std::string_view(" \t\n\r\f\v").find(text[k]) != std::string_view::npos;
      };
      if (space(i)) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < text.size() && !space(j)) ++j;
      for (std::size_t k = i; k < j; k += 4)
        want.push_back(fake_token_id(std::string_view(text).substr(k, std::min<std::size_t>(4, j - k))));
      i = j;
    }
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(FakeTokenizer, ExtendingTextExtendsTokens) {
  // GIVEN a prompt and the same prompt with a follow-up
  std::vector<TokenId> base, longer;
  fake_tokenize("system prompt shared by every tenant", base);
  fake_tokenize("system prompt shared by every tenant and then a question", longer);
  // THEN the shorter token list is a prefix of the longer (so prefix caching can hit)
  ASSERT_LT(base.size(), longer.size());
  EXPECT_TRUE(std::equal(base.begin(), base.end(), longer.begin()));
  // AND different text gives different tokens
  std::vector<TokenId> other;
  fake_tokenize("system prompt shared by every tenanT", other);
  EXPECT_NE(base, other);
}

TEST(FakeTokenizer, FillerTextTokenizesToTheGeneratedTokens) {
  // GIVEN the filler words of a request WHEN its text is tokenized THEN its tokens come back
  std::vector<TokenId> prompt;
  fake_tokenize("hello world", prompt);
  const std::uint64_t seed = filler_seed(prompt);
  std::string text;
  std::vector<TokenId> expected;
  for (int k = 0; k < 40; ++k) {
    text.append(filler_word(seed, k)).append(" ");
    expected.push_back(filler_token(seed, k));
  }
  std::vector<TokenId> got;
  fake_tokenize(text, got);
  EXPECT_EQ(got, expected);
  // AND the chat template keeps earlier turns as a prefix
  std::string t1, t2;
  FakeChatPrompt one(t1), two(t2);
  one.message("user", "hi there");
  two.message("user", "hi there");
  two.message("assistant", "hello");
  two.message("user", "more");
  const std::string r1(one.finish()), r2(two.finish());
  EXPECT_EQ(r1, "<|user|>\nhi there\n<|assistant|>\n");
  EXPECT_EQ(r2.rfind("<|user|>\nhi there\n<|assistant|>\n", 0), 0u);
}

// ---- KV events ------------------------------------------------------------------------------

std::vector<KvEvent> sample_events() {
  KvEvent stored;
  stored.kind = KvEventKind::block_stored;
  stored.block_hashes = {0xfedcba9876543210ULL, 7};
  stored.parent_block_hash = std::nullopt;
  stored.token_ids = {300, 301, 302, 303, 304, 305, 306, 307};
  stored.block_size = 4;
  KvEvent chained = stored;
  chained.block_hashes = {9};
  chained.parent_block_hash = 7;
  chained.token_ids = {1, 2, 3, 4};
  KvEvent removed;
  removed.kind = KvEventKind::block_removed;
  removed.block_hashes = {5, 6};
  KvEvent cleared;
  cleared.kind = KvEventKind::all_blocks_cleared;
  return {stored, chained, removed, cleared};
}

TEST(KvEvents, ArrayLikeEncodingFollowsVllmFieldOrder) {
  // GIVEN a batch of the three event kinds WHEN encoded array-like and decoded with msgpack-cxx
  const auto events = sample_events();
  const std::string bytes = encode_event_batch(1700000000.25, events, 0, KvEventEncoding::array_like);
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object& batch = oh.get();
  // THEN EventBatch = [ts, events, data_parallel_rank]
  ASSERT_EQ(batch.type, msgpack::type::ARRAY);
  ASSERT_EQ(batch.via.array.size, 3u);
  EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64);
  EXPECT_DOUBLE_EQ(batch.via.array.ptr[0].as<double>(), 1700000000.25);
  EXPECT_EQ(batch.via.array.ptr[2].as<int>(), 0);
  const msgpack::object& evs = batch.via.array.ptr[1];
  ASSERT_EQ(evs.via.array.size, 4u);
  // BlockStored = [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
  const msgpack::object& s = evs.via.array.ptr[0];
  ASSERT_EQ(s.via.array.size, 8u);
  EXPECT_EQ(s.via.array.ptr[0].as<std::string>(), "BlockStored");
  EXPECT_EQ(s.via.array.ptr[1].as<std::vector<std::uint64_t>>(),
            (std::vector<std::uint64_t>{0xfedcba9876543210ULL, 7}));
  EXPECT_TRUE(s.via.array.ptr[2].is_nil());
  EXPECT_EQ(s.via.array.ptr[3].as<std::vector<int>>(), (std::vector<int>{300, 301, 302, 303, 304, 305, 306, 307}));
  EXPECT_EQ(s.via.array.ptr[4].as<int>(), 4);
  EXPECT_TRUE(s.via.array.ptr[5].is_nil());
  EXPECT_EQ(s.via.array.ptr[6].as<std::string>(), "GPU");
  EXPECT_TRUE(s.via.array.ptr[7].is_nil());
  EXPECT_EQ(evs.via.array.ptr[1].via.array.ptr[2].as<std::uint64_t>(), 7u);  // parent of the chained one
  // BlockRemoved = [tag, block_hashes, medium]; AllBlocksCleared = [tag]
  const msgpack::object& r = evs.via.array.ptr[2];
  ASSERT_EQ(r.via.array.size, 3u);
  EXPECT_EQ(r.via.array.ptr[0].as<std::string>(), "BlockRemoved");
  EXPECT_EQ(r.via.array.ptr[1].as<std::vector<std::uint64_t>>(), (std::vector<std::uint64_t>{5, 6}));
  EXPECT_EQ(r.via.array.ptr[2].as<std::string>(), "GPU");
  const msgpack::object& c = evs.via.array.ptr[3];
  ASSERT_EQ(c.via.array.size, 1u);
  EXPECT_EQ(c.via.array.ptr[0].as<std::string>(), "AllBlocksCleared");
}

TEST(KvEvents, MapLikeEncodingTagsWithType) {
  // GIVEN the same batch encoded map-like WHEN decoded THEN keys name the fields, "type" the tag
  const std::string bytes = encode_event_batch(2.5, sample_events(), 3, KvEventEncoding::map_like);
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  const auto batch = oh.get().as<std::map<std::string, msgpack::object>>();
  EXPECT_DOUBLE_EQ(batch.at("ts").as<double>(), 2.5);
  EXPECT_EQ(batch.at("data_parallel_rank").as<int>(), 3);
  const auto evs = batch.at("events").as<std::vector<msgpack::object>>();
  ASSERT_EQ(evs.size(), 4u);
  const auto stored = evs[0].as<std::map<std::string, msgpack::object>>();
  EXPECT_EQ(stored.at("type").as<std::string>(), "BlockStored");
  EXPECT_EQ(stored.at("block_size").as<int>(), 4);
  EXPECT_TRUE(stored.at("parent_block_hash").is_nil());
  EXPECT_EQ(stored.at("medium").as<std::string>(), "GPU");
  using Fields = std::map<std::string, msgpack::object>;
  EXPECT_EQ(evs[1].as<Fields>().at("parent_block_hash").as<std::uint64_t>(), 7u);
  EXPECT_EQ(evs[2].as<Fields>().at("type").as<std::string>(), "BlockRemoved");
  EXPECT_EQ(evs[3].as<Fields>().at("type").as<std::string>(), "AllBlocksCleared");
}

TEST(KvEvents, SequenceNumbersAreEightBytesBigEndian) {
  EXPECT_EQ(encode_seq(0), std::string(8, '\0'));
  EXPECT_EQ(encode_seq(258), std::string("\0\0\0\0\0\0\x01\x02", 8));
  EXPECT_EQ(encode_seq(-1), std::string(8, '\xff'));
}

// ---- Prometheus ---------------------------------------------------------------------------------

TEST(Prometheus, HistogramBucketsAreCumulative) {
  // GIVEN bounds 0.1, 1 and samples 0.05, 0.5, 0.5, 5
  const double bounds[] = {0.1, 1.0};
  PromHistogram h(bounds);
  for (double v : {0.05, 0.5, 0.5, 5.0}) h.observe(v);
  std::string out;
  h.write(out, "x_seconds", "help", "model_name=\"m\"");
  // THEN le buckets count every sample at or below them
  EXPECT_NE(out.find("x_seconds_bucket{model_name=\"m\",le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{model_name=\"m\",le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_count{model_name=\"m\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_sum{model_name=\"m\"} 6.05\n"), std::string::npos) << out;
}

// ---- in-process worker with a ZMQ subscriber ----------------------------------------------------

std::uint16_t free_port() {
  net::io_context io;
  http::tcp::acceptor a(io, http::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

/// A worker on free KV-event ports. A port free_port() saw free can be taken by another test process
/// before the worker binds it (ctest runs suites in parallel): pick again then, a few times. `c`
/// keeps the ports the worker got.
template <class Model>
auto create_on_free_kv_ports(SimWorkerConfig& c, const Model& model) {
  auto w = SimWorker::create(c, model);
  for (int attempt = 0; attempt < 5 && !w.has_value() && w.error().find("Address already in use") != std::string::npos;
       ++attempt) {
    c.kv_events_port = free_port();
    c.kv_events_replay_port = free_port();
    w = SimWorker::create(c, model);
  }
  return w;
}

CostModel small_model() {
  // A 1B-parameter model on a fast accelerator: steps of tens of microseconds at speedup 10.
  CostModelParams p;
  p.weight_bytes_per_rank = 2e9;
  p.kv_bytes_per_token = 32768;
  p.active_parameters = 1e9;
  p.layers = 16;
  p.hidden_size = 2048;
  p.peak_flops_per_second = 1e15;
  p.hbm_bytes_per_second = 3e12;
  p.fabric_bytes_per_second = 5e10;
  auto m = CostModel::create(p);
  EXPECT_TRUE(m.has_value());
  return *m;
}

struct WorkerRun {
  std::unique_ptr<SimWorker> worker;
  std::thread thread;
  ~WorkerRun() {
    if (worker) worker->drain();
    if (thread.joinable()) thread.join();
  }
};

nlohmann::json post(std::uint16_t port, const std::string& path, const nlohmann::json& body,
                    unsigned* status = nullptr) {
  net::io_context io;
  nlohmann::json out;
  net::co_spawn(
      io,
      [&]() -> http::Task<void> {
        http::ClientRequest req;
        req.method = http::bhttp::verb::post;
        req.target = path;
        req.body = body.dump();
        auto r = co_await http::fetch(io.get_executor(), "127.0.0.1", port, std::move(req));
        if (!r) co_return;
        if (status) *status = r->status;
        out = nlohmann::json::parse(r->body, nullptr, false);
      },
      net::detached);
  io.run();
  return out;
}

// A worker publishing KV events (block size 4, topic kv@test@m) with a replay socket, run on its own
// thread, and a subscriber to them: what the KV-event worker tests start from.
class SimWorkerKvEvents : public ::testing::Test {
 protected:
  /// The configuration the tests share; each sets what it tests (release, adapters) before start().
  static SimWorkerConfig shared_config() {
    SimWorkerConfig c;
    c.port = 0;
    c.model_name = "m";
    c.block_size = 4;
    c.kv_blocks = 256;
    c.max_model_len = 1024;
    c.speedup = 10;
    c.kv_events_port = free_port();
    c.kv_events_replay_port = free_port();
    c.kv_events_topic = "kv@test@m";
    return c;
  }
  /// Creates and runs the worker of `c`, then subscribes to its KV events.
  void start(SimWorkerConfig c) {
    auto w = create_on_free_kv_ports(c, small_model());
    ASSERT_TRUE(w.has_value()) << w.error();
    config_ = c;
    run_.worker = std::move(*w);
    run_.thread = std::thread([this] { run_.worker->run(); });
    port_ = run_.worker->port();
    sub_.set(zmq::sockopt::subscribe, "kv@");
    sub_.set(zmq::sockopt::rcvtimeo, 3000);
    sub_.connect("tcp://127.0.0.1:" + std::to_string(config_.kv_events_port));
    std::this_thread::sleep_for(200ms);  // PUB/SUB: let the subscription reach the publisher
  }
  /// A DEALER on the worker's replay socket that has asked for every batch from sequence 0.
  zmq::socket_t replay_from_zero() {
    zmq::socket_t dealer(ctx_, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::rcvtimeo, 3000);
    dealer.connect("tcp://127.0.0.1:" + std::to_string(config_.kv_events_replay_port));
    dealer.send(zmq::message_t(), zmq::send_flags::sndmore);  // the REQ-style empty delimiter
    dealer.send(zmq::buffer(encode_seq(0)), zmq::send_flags::none);
    return dealer;
  }

  SimWorkerConfig config_;  // as the worker got it (its ports included)
  std::uint16_t port_ = 0;  // its HTTP port
  zmq::context_t ctx_;      // declared before the sockets, which must close first
  zmq::socket_t sub_{ctx_, zmq::socket_type::sub};
  WorkerRun run_;
};

TEST_F(SimWorkerKvEvents, SubscriberSeesStoredBlocksOfThePromptAndReplayWorks) {
  // GIVEN a worker imitating vLLM 0.19 (array-like structs, replay answers without the topic)
  SimWorkerConfig c = shared_config();
  c.vllm_release = *kv_wire::vllm_release("0.19.1");
  start(c);
  const std::uint16_t port = port_;
  zmq::socket_t& sub = sub_;

  // WHEN a 9-word prompt (9 tokens: 2 full blocks + 1) is completed with 3 tokens
  const std::string prompt = "ab cd ef gh ij kl mn op qr";
  unsigned status = 0;
  const auto res = post(port, "/v1/completions", {{"model", "m"}, {"prompt", prompt}, {"max_tokens", 3}}, &status);
  ASSERT_EQ(status, 200u) << res.dump();
  EXPECT_EQ(res["usage"]["prompt_tokens"], 9);
  EXPECT_EQ(res["usage"]["completion_tokens"], 3);

  // THEN the subscriber receives [topic, seq 0, batch] whose BlockStored holds the prompt's tokens
  std::vector<TokenId> tokens;
  fake_tokenize(prompt, tokens);
  std::vector<zmq::message_t> frames;
  std::vector<std::uint64_t> stored_hashes;
  std::vector<int> stored_tokens;
  bool first_parent_nil = false;
  std::int64_t expected_seq = 0;
  while (stored_hashes.size() < 2) {
    frames.clear();
    auto got = zmq::recv_multipart(sub, std::back_inserter(frames));
    ASSERT_TRUE(got.has_value()) << "no KV event within 3 s";
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].to_string(), "kv@test@m");
    ASSERT_EQ(frames[1].size(), 8u);
    EXPECT_EQ(frames[1].to_string(), encode_seq(expected_seq++)) << "sequence numbers must be gapless";
    msgpack::object_handle oh = msgpack::unpack(static_cast<const char*>(frames[2].data()), frames[2].size());
    const msgpack::object& evs = oh.get().via.array.ptr[1];
    for (std::uint32_t i = 0; i < evs.via.array.size; ++i) {
      const msgpack::object& e = evs.via.array.ptr[i];
      if (e.via.array.ptr[0].as<std::string>() != "BlockStored") continue;
      if (stored_hashes.empty()) first_parent_nil = e.via.array.ptr[2].is_nil();
      for (auto h : e.via.array.ptr[1].as<std::vector<std::uint64_t>>()) stored_hashes.push_back(h);
      for (int t : e.via.array.ptr[3].as<std::vector<int>>()) stored_tokens.push_back(t);
      EXPECT_EQ(e.via.array.ptr[4].as<int>(), 4);
    }
  }
  EXPECT_TRUE(first_parent_nil);
  BlockHash expected[2];
  ASSERT_EQ(hash_blocks(tokens, 4, kRootBlockHash, expected), 2u);
  EXPECT_EQ(stored_hashes[0], expected[0]);
  EXPECT_EQ(stored_hashes[1], expected[1]);
  EXPECT_EQ(std::vector<int>(stored_tokens.begin(), stored_tokens.begin() + 8),
            std::vector<int>(tokens.begin(), tokens.begin() + 8));

  // WHEN the same prompt comes again THEN its two full blocks are prefix-cache hits
  const auto again = post(port, "/v1/completions", {{"model", "m"}, {"prompt", prompt}, {"max_tokens", 2}});
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 8) << again.dump();

  // WHEN a replay from seq 0 is requested THEN buffered batches come back from 0, then seq -1
  zmq::socket_t dealer = replay_from_zero();
  std::vector<std::string> seqs;
  while (true) {
    frames.clear();
    ASSERT_TRUE(zmq::recv_multipart(dealer, std::back_inserter(frames)).has_value());
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].size(), 0u);
    seqs.push_back(frames[1].to_string());
    if (seqs.back() == encode_seq(-1)) {
      EXPECT_EQ(frames[2].size(), 0u);
      break;
    }
    EXPECT_GT(frames[2].size(), 0u);
  }
  ASSERT_GE(seqs.size(), 2u);
  EXPECT_EQ(seqs[0], encode_seq(0));
  // Every batch published so far (at least those the subscriber saw), gapless from 0.
  EXPECT_GE(seqs.size() - 1, static_cast<std::size_t>(expected_seq));
  for (std::size_t i = 0; i + 1 < seqs.size(); ++i) EXPECT_EQ(seqs[i], encode_seq(static_cast<std::int64_t>(i)));
}

using Fields = std::map<std::string, msgpack::object>;

// Receives BlockStored maps from `sub` (map-like events in a positional batch) until `want` blocks.
std::vector<Fields> stored_maps(zmq::socket_t& sub, std::size_t want, std::vector<msgpack::object_handle>& keep) {
  std::vector<Fields> out;
  std::size_t blocks = 0;
  while (blocks < want) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(sub, std::back_inserter(frames)).has_value() || frames.size() != 3) break;
    keep.push_back(msgpack::unpack(static_cast<const char*>(frames[2].data()), frames[2].size()));
    const msgpack::object& batch = keep.back().get();
    EXPECT_EQ(batch.type, msgpack::type::ARRAY) << "vLLM 0.26 keeps the batch positional";
    if (batch.type != msgpack::type::ARRAY) break;
    for (const auto& e : batch.via.array.ptr[1].as<std::vector<msgpack::object>>()) {
      EXPECT_EQ(e.type, msgpack::type::MAP) << "vLLM 0.26 writes events as maps";
      if (e.type != msgpack::type::MAP) continue;
      Fields f = e.as<Fields>();
      if (f.at("type").as<std::string>() != "BlockStored") continue;
      blocks += f.at("block_hashes").via.array.size;
      out.push_back(std::move(f));
    }
  }
  return out;
}

TEST_F(SimWorkerKvEvents, ImitatesVllm026MapEventsLoraAndSaltExtraKeysAndReplayWithTopic) {
  // GIVEN a worker at the default release (0.26) serving a LoRA adapter, with a replay socket
  SimWorkerConfig c = shared_config();
  c.lora_adapters = {"sql-lora"};
  ASSERT_EQ(c.vllm_release.replay, kv_wire::ReplayFraming::topic_seq_payload);
  start(c);
  const std::uint16_t port = port_;
  zmq::socket_t& sub = sub_;

  // WHEN the LoRA adapter completes a salted 9-token prompt
  const std::string prompt = "ab cd ef gh ij kl mn op qr";
  unsigned status = 0;
  const auto res =
      post(port, "/v1/completions",
           {{"model", "sql-lora"}, {"prompt", prompt}, {"max_tokens", 3}, {"cache_salt", "tenant-a"}}, &status);
  ASSERT_EQ(status, 200u) << res.dump();

  // THEN its BlockStored maps carry lora_name, lora_id and extra_keys as vLLM's: (lora, salt) for
  // the sequence's first block, (lora) for later ones; the hashes chain from chain_root
  std::vector<msgpack::object_handle> keep;
  const auto stored = stored_maps(sub, 2, keep);
  ASSERT_FALSE(stored.empty());
  const Fields& first = stored[0];
  EXPECT_TRUE(first.at("parent_block_hash").is_nil());
  EXPECT_EQ(first.at("lora_name").as<std::string>(), "sql-lora");
  EXPECT_EQ(first.at("lora_id").as<int>(), 1);
  const auto extra = first.at("extra_keys").as<std::vector<msgpack::object>>();
  ASSERT_GE(extra.size(), 1u);
  EXPECT_EQ(extra[0].as<std::vector<std::string>>(), (std::vector<std::string>{"sql-lora", "tenant-a"}));
  if (extra.size() > 1) { EXPECT_EQ(extra[1].as<std::vector<std::string>>(), (std::vector<std::string>{"sql-lora"})); }
  std::vector<TokenId> tokens;
  fake_tokenize(prompt, tokens);
  BlockHash expected[2];
  ASSERT_EQ(hash_blocks(tokens, 4, chain_root(extra_key_digest("sql-lora"), extra_key_digest("tenant-a")), expected),
            2u);
  EXPECT_EQ(first.at("block_hashes").via.array.ptr[0].as<std::uint64_t>(), expected[0]);
  // AND an invalid cache_salt is refused as vLLM refuses it
  status = 0;
  post(port, "/v1/completions", {{"model", "m"}, {"prompt", prompt}, {"cache_salt", ""}}, &status);
  EXPECT_EQ(status, 400u);

  // WHEN a replay from seq 0 is requested THEN answers are ["", topic, seq, payload] and the end
  // marker ["", "", -1, ""] (vLLM PR #45177)
  zmq::socket_t dealer = replay_from_zero();
  std::size_t answers = 0;
  while (true) {
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(dealer, std::back_inserter(frames)).has_value());
    ASSERT_EQ(frames.size(), 4u);
    std::vector<std::string_view> views;
    for (const auto& f : frames) views.push_back(f.to_string_view());
    const auto reply = kv_wire::parse_replay_reply(views);
    ASSERT_TRUE(reply.has_value());
    if (reply->end()) {
      EXPECT_TRUE(reply->topic.empty());
      break;
    }
    EXPECT_EQ(reply->topic, "kv@test@m");
    EXPECT_EQ(reply->seq, static_cast<std::int64_t>(answers));
    ++answers;
  }
  EXPECT_GE(answers, 1u);
}

// ---- client disconnect aborts the request ---------------------------------------------------

// name{labels} -> value of /metrics (bucket lines skipped); empty when the worker did not answer.
std::map<std::string, double> scrape(std::uint16_t port) {
  net::io_context io;
  std::map<std::string, double> out;
  net::co_spawn(
      io,
      [&]() -> http::Task<void> {
        http::ClientRequest req;
        req.method = http::bhttp::verb::get;
        req.target = "/metrics";
        auto r = co_await http::fetch(io.get_executor(), "127.0.0.1", port, std::move(req));
        if (!r) co_return;
        std::istringstream lines(r->body);
        std::string line;
        while (std::getline(lines, line)) {
          if (line.empty() || line[0] == '#' || line.find("_bucket{") != std::string::npos) continue;
          const auto cut = line.rfind(' ');
          out[line.substr(0, cut)] = std::stod(line.substr(cut + 1));
        }
      },
      net::detached);
  io.run();
  return out;
}

// The value of the one series of `family` whose labels contain `label` (e.g. finished_reason="abort").
double metric(const std::map<std::string, double>& m, const std::string& family, const std::string& label = "") {
  for (const auto& [key, value] : m) {
    if (key.rfind(family + "{", 0) == 0 && key.find(label) != std::string::npos) return value;
  }
  return -1;
}

// Polls /metrics until `done` holds or `limit` passes; returns the last scrape.
template <class Pred>
std::map<std::string, double> wait_metrics(std::uint16_t port, std::chrono::milliseconds limit, Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto m = scrape(port);
  while (!done(m) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    m = scrape(port);
  }
  return m;
}

// A raw HTTP/1.1 client that can hang up mid-response.
struct RawClient {
  net::io_context io;
  http::tcp::socket socket{io};
  explicit RawClient(std::uint16_t port) {
    socket.connect(http::tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }
  void post(const std::string& path, const std::string& body) {
    const std::string req = "POST " + path +
                            " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    net::write(socket, net::buffer(req));
  }
  // Reads until `needle` was received (or the peer closed); returns what was read.
  std::string read_until(const std::string& needle) {
    std::string got;
    char buf[4096];
    boost::system::error_code ec;
    while (got.find(needle) == std::string::npos) {
      const std::size_t n = socket.read_some(net::buffer(buf), ec);
      if (ec) break;
      got.append(buf, n);
    }
    return got;
  }
  void hang_up() {
    boost::system::error_code ec;
    socket.shutdown(http::tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }
};

class SimWorkerAbort : public ::testing::TestWithParam<bool> {};

TEST_P(SimWorkerAbort, ClientThatLeavesFreesTheSequenceAndTheWorkerServesOn) {
  const bool stream = GetParam();
  // GIVEN a worker at real speed (a 1B model: ~0.7 ms per decode step, so 4000 tokens take seconds)
  SimWorkerConfig c;
  c.port = 0;
  c.model_name = "m";
  c.block_size = 16;
  c.kv_blocks = 1024;
  c.max_model_len = 16384;
  c.speedup = 1;
  auto w = create_on_free_kv_ports(c, small_model());
  ASSERT_TRUE(w.has_value()) << w.error();
  WorkerRun run;
  run.worker = std::move(*w);
  run.thread = std::thread([&run] { run.worker->run(); });
  const std::uint16_t port = run.worker->port();
  const auto idle = wait_metrics(port, 2s, [](const auto& m) { return !m.empty(); });
  const double idle_kv = metric(idle, "vllm:kv_cache_usage_perc");
  ASSERT_EQ(metric(idle, "vllm:request_success_total", "finished_reason=\"abort\""), 0) << "no abort series";

  // WHEN a client asks for 4000 tokens and hangs up once it is running (streaming: after the
  // first tokens arrived)
  RawClient client(port);
  const nlohmann::json body = {
      {"model", "m"}, {"prompt", "tell me a very long story about the sea"}, {"max_tokens", 4000}, {"stream", stream}};
  client.post("/v1/completions", body.dump());
  if (stream) {
    const std::string head = client.read_until("data: ");
    ASSERT_NE(head.find("200 OK"), std::string::npos) << head;
  }
  const auto busy = wait_metrics(port, 5s, [](const auto& m) {
    return metric(m, "vllm:num_requests_running") == 1 && metric(m, "vllm:generation_tokens_total") >= 0;
  });
  ASSERT_EQ(metric(busy, "vllm:num_requests_running"), 1);
  EXPECT_GT(metric(busy, "vllm:kv_cache_usage_perc"), idle_kv);
  if (!stream) std::this_thread::sleep_for(200ms);  // the client's patience, not a condition
  client.hang_up();

  // THEN the worker aborts it: nothing runs, the abort is counted, KV use is back to idle, and
  // the request did not run to its end (no success with reason length)
  const auto after = wait_metrics(port, 3s, [&](const auto& m) {
    return metric(m, "vllm:num_requests_running") == 0 &&
           metric(m, "vllm:request_success_total", "finished_reason=\"abort\"") == 1 &&
           metric(m, "vllm:kv_cache_usage_perc") == idle_kv;
  });
  EXPECT_EQ(metric(after, "vllm:num_requests_running"), 0);
  EXPECT_EQ(metric(after, "vllm:num_requests_waiting"), 0);
  EXPECT_EQ(metric(after, "vllm:request_success_total", "finished_reason=\"abort\""), 1);
  EXPECT_EQ(metric(after, "vllm:request_success_total", "finished_reason=\"length\""), 0);
  EXPECT_EQ(metric(after, "vllm:kv_cache_usage_perc"), idle_kv);
  EXPECT_LT(metric(after, "vllm:generation_tokens_total"), 4000);

  // AND the worker still serves a new request
  unsigned status = 0;
  const auto res =
      post(port, "/v1/completions", {{"model", "m"}, {"prompt", "and now a short one"}, {"max_tokens", 3}}, &status);
  EXPECT_EQ(status, 200u) << res.dump();
  EXPECT_EQ(res["usage"]["completion_tokens"], 3);
  const auto last = scrape(port);
  EXPECT_EQ(metric(last, "vllm:request_success_total", "finished_reason=\"length\""), 1);
}

// A worker on an ephemeral port, fast enough for a few short requests.
struct QuickWorker {
  WorkerRun run;
  std::uint16_t port = 0;
  QuickWorker() {
    SimWorkerConfig c;
    c.port = 0;
    c.model_name = "m";
    c.kv_blocks = 256;
    c.max_model_len = 4096;
    c.speedup = 100;
    auto w = SimWorker::create(c, small_model());
    EXPECT_TRUE(w.has_value()) << w.error();
    run.worker = std::move(*w);
    run.thread = std::thread([this] { run.worker->run(); });
    port = run.worker->port();
  }
};

TEST(SimWorkerHttp, BodiesNestedDeeperThanTheLimitAre400WithoutAParse) {
  QuickWorker w;
  // GIVEN 4 MB of '[' (it built a 4,000,000-level document before the depth check)
  RawClient deep(w.port);
  deep.post("/v1/completions", std::string(4'000'000, '['));
  // THEN a 400 naming the limit
  const std::string res = deep.read_until("}}");
  EXPECT_EQ(res.rfind("HTTP/1.1 400", 0), 0u) << res.substr(0, 300);
  EXPECT_NE(res.find("json_too_deep"), std::string::npos) << res;
  EXPECT_NE(res.find("64 levels"), std::string::npos) << res;
  // AND a request at the limit is parsed (then refused for what it is: no prompt)
  unsigned status = 0;
  nlohmann::json at_limit = {{"model", "m"}, {"prompt", "x"}, {"max_tokens", 1}};
  nlohmann::json nest = nlohmann::json::array();
  for (std::size_t i = 2; i < kMaxRequestJsonDepth; ++i) nest = nlohmann::json::array({nest});
  at_limit["extra"] = nest;  // levels: the object, then 63 arrays
  const auto ok = post(w.port, "/v1/completions", at_limit, &status);
  EXPECT_EQ(status, 200u) << ok.dump();
}

TEST(SimWorkerHttp, UnknownPathsAre404WhateverTheMethodKnownOnes405) {
  QuickWorker w;
  const auto status_of = [&](const std::string& method, const std::string& path) {
    RawClient c(w.port);
    net::write(c.socket, net::buffer(method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    const std::string res = c.read_until("\r\n");
    return res.substr(0, 12);
  };
  EXPECT_EQ(status_of("POST", "/v1/nothing"), "HTTP/1.1 404");
  EXPECT_EQ(status_of("DELETE", "/v1/nothing"), "HTTP/1.1 404");
  EXPECT_EQ(status_of("GET", "/v1/nothing"), "HTTP/1.1 404");
  EXPECT_EQ(status_of("GET", "/v1/completions"), "HTTP/1.1 405");
  EXPECT_EQ(status_of("POST", "/metrics"), "HTTP/1.1 405");
}

TEST(SimWorkerHttp, ChatPartsOfOtherShapesAreSkippedNotA500) {
  QuickWorker w;
  // GIVEN a chat whose content parts have a numeric type, a missing text and a text part
  unsigned status = 0;
  const nlohmann::json parts = nlohmann::json::array(
      {{{"type", 7}, {"text", "x"}}, {{"type", "text"}}, {{"type", "text"}, {"text", "hello there"}}});
  const auto res = post(w.port, "/v1/chat/completions",
                        {{"model", "m"},
                         {"max_tokens", 1},
                         {"messages", nlohmann::json::array({{{"role", "user"}, {"content", parts}}})}},
                        &status);
  // THEN the text part alone is the content, as the router renders it
  EXPECT_EQ(status, 200u) << res.dump();
  std::string text;
  FakeChatPrompt p(text);
  p.message("user", "hello there");
  std::vector<TokenId> tokens;
  fake_tokenize(p.finish(), tokens);
  EXPECT_EQ(res["usage"]["prompt_tokens"], tokens.size());
}

TEST(SimWorkerConfig, ConnectionLimitAndTimeoutsAreFlags) {
  std::vector<std::string> args = {"sim-worker", "--config",
                                   "x.json",     "--max-connections",
                                   "50",         "--keepalive-timeout-ms",
                                   "700",        "--header-timeout-ms",
                                   "800",        "--body-timeout-ms",
                                   "900"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  bool help = false;
  auto c = parse_sim_worker_args(static_cast<int>(argv.size()), argv.data(), &help);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->max_connections, 50u);
  EXPECT_EQ(c->keepalive_timeout_ms, 700);
  EXPECT_EQ(c->header_timeout_ms, 800);
  EXPECT_EQ(c->body_timeout_ms, 900);
  args[4] = "0";
  argv.clear();
  for (auto& a : args) argv.push_back(a.data());
  auto zero = parse_sim_worker_args(static_cast<int>(argv.size()), argv.data(), &help);
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("'--max-connections' (0)"), std::string::npos) << zero.error();
}

TEST(SimWorkerConfig, KvLoadFailureFlags) {
  // GIVEN the defaults THEN no pull fails, and a failed one would fail the request (vLLM's default)
  std::vector<std::string> args = {"sim-worker", "--config", "x.json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  bool help = false;
  auto d = parse_sim_worker_args(static_cast<int>(argv.size()), argv.data(), &help);
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->kv_load_fail_rate, 0.0);
  EXPECT_EQ(d->kv_load_failure_policy, KvLoadFailurePolicy::fail);
  // WHEN both are given THEN they are read
  args = {"sim-worker", "--config", "x.json", "--kv-load-fail-rate", "0.25", "--kv-load-failure-policy", "recompute"};
  argv.clear();
  for (auto& a : args) argv.push_back(a.data());
  auto c = parse_sim_worker_args(static_cast<int>(argv.size()), argv.data(), &help);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->kv_load_fail_rate, 0.25);
  EXPECT_EQ(c->kv_load_failure_policy, KvLoadFailurePolicy::recompute);
  // AND values out of range name the flag and the fix
  args[4] = "1.5";
  args[6] = "retry";
  for (int bad : {4, 6}) {
    std::vector<std::string> one = {"sim-worker", "--config", "x.json", args[bad - 1], args[bad]};
    argv.clear();
    for (auto& a : one) argv.push_back(a.data());
    auto e = parse_sim_worker_args(static_cast<int>(argv.size()), argv.data(), &help);
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().find("'" + args[bad - 1] + "' (" + args[bad] + ")"), std::string::npos) << e.error();
  }
}

INSTANTIATE_TEST_SUITE_P(StreamOrNot, SimWorkerAbort, ::testing::Bool(),
                         [](const auto& param_info) { return param_info.param ? "Streaming" : "NonStreaming"; });

}  // namespace
}  // namespace disagg::sim_worker
