// `disagg-engine tokenize`: NDJSON requests in, NDJSON answers out (see text_command.h).
//
// Request lines:
//   {"text": "...", "add_special_tokens": true}      -> {"ids": [...]}
//   {"base64": "...", "add_special_tokens": false}   -> {"ids": [...]}   (raw bytes, any UTF-8 validity)
//   {"ids": [...], "skip_special_tokens": false}     -> {"text": "..."}
//   {"messages": [...], ...a chat request}          -> {"ids": [...], "prompt": "..."}  (chat template)
// add_special_tokens defaults to true, as in Hugging Face's encode() (false for chat, as in vLLM);
// a bad line gets {"error": ...}. With --repeat N, "ns" is the median time of one encode (for
// chat: render + encode + block hashes, the router's whole prompt path).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "disagg/block_hash.h"
#include "model_text.h"
#include "cmd/text_command.h"
#include "tokenizer.h"

namespace disagg::text {
namespace {

constexpr std::string_view kHelp =
    "usage: disagg-engine tokenize --tokenizer DIR\n"
    "  Reads NDJSON requests on stdin and writes one NDJSON answer per line:\n"
    "    {\"text\": \"...\", \"add_special_tokens\": true}   -> {\"ids\": [...]}\n"
    "    {\"base64\": \"...\"}                              -> {\"ids\": [...]}  (raw bytes)\n"
    "    {\"ids\": [...], \"skip_special_tokens\": false}  -> {\"text\": \"...\"}\n"
    "    {\"messages\": [...], ...}                        -> {\"ids\": [...], \"prompt\": \"...\"}  (chat template)\n"
    "  --tokenizer DIR   a folder with the model's tokenizer.json (and tokenizer_config.json)\n"
    "  --repeat N        encode each text N times more and add \"ns\": the median wall time of one\n"
    "                    encode on this thread's warm scratch (for bench/tokenizer.sh)\n"
    "  --segment-cache on|off  keep the ids of pieces between special tokens across requests, as the\n"
    "                    router and the sim-worker do (off: every text is encoded in full; the\n"
    "                    differential tests and --repeat measure the full encode)\n";

bool decode_base64(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  out.clear();
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

}  // namespace

int run_tokenize_command(int argc, char** argv) {
  std::string dir;
  long repeat = 0;
  bool segment_cache = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (arg == "--tokenizer" && i + 1 < argc) {
      dir = argv[++i];
    } else if (arg == "--repeat" && i + 1 < argc) {
      char* end = nullptr;
      repeat = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || repeat < 0 || repeat > 1'000'000) {
        std::cerr << "tokenize: --repeat takes a count from 0 to 1000000, got '" << argv[i] << "'\n";
        return 2;
      }
    } else if (arg == "--segment-cache" && i + 1 < argc) {
      const std::string_view v = argv[++i];
      if (v != "on" && v != "off") {
        std::cerr << "tokenize: --segment-cache takes on or off, got '" << v << "'\n";
        return 2;
      }
      segment_cache = v == "on";
    } else {
      std::cerr << "tokenize: unknown flag '" << arg << "'\n" << kHelp;
      return 2;
    }
  }
  if (dir.empty()) {
    std::cerr << "tokenize: --tokenizer DIR is required (a folder with the model's tokenizer.json)\n";
    return 2;
  }
  auto tokenizer = Tokenizer::load(dir);
  if (!tokenizer) {
    std::cerr << "tokenize: " << tokenizer.error().message << "\n";
    return 1;
  }
  EncodeScratch scratch(segment_cache ? EncodeScratch::kDefaultSegmentCacheBytes : 0);
  std::vector<TokenId> ids;
  std::vector<BlockHash> hashes;
  std::string line, bytes, prompt;
  // The chat template is loaded at the first chat request, so that tokenizer-only folders work.
  std::optional<Expected<ModelText, std::string>> model;
  auto median_ns = [&](auto&& once) {
    std::vector<std::int64_t> times;
    times.reserve(static_cast<std::size_t>(repeat));
    for (long r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      once();
      times.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    return times[times.size() / 2];
  };
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const auto request = nlohmann::json::parse(line, nullptr, false);
    nlohmann::json answer;
    if (request.is_discarded() || !request.is_object()) {
      answer = {{"error", "a request is one JSON object per line"}};
    } else if (request.contains("messages")) {
      if (!model) model = ModelText::load(dir);
      if (!*model) {
        answer = {{"error", (*model).error()}};
      } else {
        const ModelText& m = (*model).value();
        const auto ordered = nlohmann::ordered_json::parse(line);
        ids.clear();
        auto done = m.chat_tokens(ordered, scratch, prompt, ids);
        if (!done) {
          answer = {{"error", done.error()}};
        } else {
          answer = {{"ids", ids}, {"prompt", prompt}};
          if (repeat > 0) {
            answer["ns"] = median_ns([&] {
              ids.clear();
              (void)m.chat_tokens(ordered, scratch, prompt, ids);
              hashes.resize(ids.size() / 16);
              hash_blocks(ids, 16, kRootBlockHash, hashes);
            });
          }
        }
      }
    } else if (request.contains("ids")) {
      std::vector<TokenId> in;
      bool ok = request["ids"].is_array();
      for (const auto& id : ok ? request["ids"] : nlohmann::json::array()) {
        if (!id.is_number_unsigned()) ok = false;
        else in.push_back(id.get<TokenId>());
      }
      if (!ok) answer = {{"error", "\"ids\" must be an array of token ids >= 0"}};
      else answer = {{"text", tokenizer->decode(in, request.value("skip_special_tokens", false))}};
    } else {
      const bool special = request.value("add_special_tokens", true);
      bool ok = true;
      if (request.contains("base64") && request["base64"].is_string()) {
        ok = decode_base64(request["base64"].get<std::string>(), bytes);
      } else if (request.contains("text") && request["text"].is_string()) {
        bytes = request["text"].get<std::string>();
      } else {
        ok = false;
      }
      if (!ok) {
        answer = {{"error", "a request needs \"text\" (a string), \"base64\" (bytes) or \"ids\""}};
      } else {
        ids.clear();
        tokenizer->encode(bytes, special, scratch, ids);
        answer = {{"ids", ids}};
        if (repeat > 0) {
          answer["ns"] = median_ns([&] {
            ids.clear();
            tokenizer->encode(bytes, special, scratch, ids);
          });
        }
      }
    }
    std::cout << answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  std::cout.flush();
  return 0;
}

}  // namespace disagg::text
