#include "cost_command.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/cost_model_config.h"
#include "disagg/cost_report.h"
#include "lib/config/nlohmann_config_source.h"

namespace disagg::cli {

namespace {

constexpr std::string_view kUsage =
    "usage: disagg-engine cost --config FILE.json [--prefill-tokens N,N,...]\n"
    "         [--decode-batches N,N,...] [--context-tokens N] [--mixed-chunk-tokens N]\n"
    "         [--transfer-tokens N,N,...]\n"
    "Prints the roofline step times of the model, hardware, parallel and efficiency sections of\n"
    "FILE.json (engine/schema/engine-config.schema.json) as JSON.\n";

bool parse_int(std::string_view text, std::int64_t* out) {
  const char* end = text.data() + text.size();
  auto res = std::from_chars(text.data(), end, *out);
  return res.ec == std::errc() && res.ptr == end;
}

bool parse_list(std::string_view text, std::vector<std::int64_t>* out) {
  out->clear();
  while (true) {
    const std::size_t comma = text.find(',');
    std::int64_t v = 0;
    if (!parse_int(text.substr(0, comma), &v)) return false;
    out->push_back(v);
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

int usage_error(const std::string& why) {
  std::cerr << "disagg-engine cost: " << why << "\n" << kUsage;
  return 2;
}

}  // namespace

int run_cost_command(int argc, char** argv) {
  std::string config_path;
  CostProbes probes;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (i + 1 >= argc) return usage_error("'" + std::string(flag) + "' needs a value");
    const std::string_view value = argv[++i];
    bool ok = true;
    if (flag == "--config") {
      config_path = value;
    } else if (flag == "--prefill-tokens") {
      ok = parse_list(value, &probes.prefill_tokens);
    } else if (flag == "--decode-batches") {
      ok = parse_list(value, &probes.decode_batches);
    } else if (flag == "--transfer-tokens") {
      ok = parse_list(value, &probes.transfer_tokens);
    } else if (flag == "--context-tokens") {
      ok = parse_int(value, &probes.context_tokens_per_sequence);
    } else if (flag == "--mixed-chunk-tokens") {
      ok = parse_int(value, &probes.mixed_chunk_tokens);
    } else {
      return usage_error("unknown flag '" + std::string(flag) + "'");
    }
    if (!ok) {
      return usage_error("'" + std::string(flag) + "' (" + std::string(value) +
                         ") must be whole numbers separated by commas, e.g. 128,512");
    }
  }
  if (config_path.empty()) return usage_error("--config FILE.json is required");
  if (auto valid = validate(probes); !valid) return usage_error(valid.error().message());

  std::ifstream in(config_path);
  if (!in) {
    std::cerr << "disagg-engine cost: cannot read '" << config_path << "': " << std::strerror(errno) << "\n";
    return 1;
  }
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    std::cerr << "disagg-engine cost: '" << config_path << "' is not valid JSON\n";
    return 1;
  }
  if (!doc.is_object()) {
    std::cerr << "disagg-engine cost: '" << config_path
              << "' must hold a JSON object with model, hardware, parallel and efficiency\n";
    return 1;
  }
  auto model = read_cost_model(NlohmannConfigSource(doc));
  if (!model) {
    std::cerr << "disagg-engine cost: " << model.error().message() << "\n";
    return 1;
  }
  std::cout << to_json(build_cost_report(*model, probes)) << "\n";
  return 0;
}

}  // namespace disagg::cli
