// The router's API keys on loopback: an in-process Router (router.apiKeys.file) in front of a
// recording upstream, driven by a raw HTTP client. Guarded paths answer 401 with the OpenAI error
// body and a Bearer challenge without a key or with a wrong one; open paths stay open; a right key
// is proxied and the worker never sees the client's Authorization header; a rewritten key file is
// used within a few seconds; a router whose key file is missing or empty does not start.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "router_loopback.h"

namespace disagg::router {
namespace {

namespace fs = std::filesystem;
using namespace testing;

RouterConfig config_for(std::uint16_t upstream_port, const std::string& key_file) {
  RouterConfig c = testing::config_for(upstream_port);
  c.api_key_file = key_file;
  return c;
}

class KeyFile {
 public:
  explicit KeyFile(const std::string& text) {
    path_ = fs::temp_directory_path() / ("disagg-router-auth-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    write(text);
  }
  ~KeyFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  void write(const std::string& text) const {
    // A new file renamed over the old one: a new inode, as a Secret update brings.
    const fs::path tmp = path_.string() + ".tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
    fs::rename(tmp, path_);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

const std::string kCompletion = R"({"model":"m","prompt":"hello there","max_tokens":2})";

TEST(RouterAuth, GuardedPathsNeedABearerKeyOpenOnesDoNot) {
  Upstream up;
  KeyFile keys("# test keys\nsk-right\n");
  RunningRouter router(config_for(up.port(), keys.path()));
  const std::uint16_t port = router.port();
  // WHEN a completion comes without a key, or with a wrong one
  const Reply none = call(port, "POST", "/v1/completions", "", kCompletion);
  const Reply wrong = call(port, "POST", "/v1/completions", "Bearer sk-wrong", kCompletion);
  // THEN both get 401, a Bearer challenge and OpenAI's invalid_api_key error, which never echoes the key
  for (const Reply* r : {&none, &wrong}) {
    EXPECT_EQ(r->status, 401) << r->head;
    EXPECT_NE(r->head.find("\r\nWWW-Authenticate: Bearer"), std::string::npos) << r->head;
    const auto body = nlohmann::json::parse(r->body);
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["code"], "invalid_api_key");
    EXPECT_TRUE(body["error"]["param"].is_null());
    EXPECT_EQ(r->body.find("sk-"), std::string::npos) << r->body;
  }
  EXPECT_NE(none.body.find("didn't provide an API key"), std::string::npos) << none.body;
  EXPECT_NE(wrong.body.find("Incorrect API key"), std::string::npos) << wrong.body;
  // AND the other guarded paths too, before routing (a GET on a POST route is 401, not 405)
  EXPECT_EQ(call(port, "GET", "/v1/models", "").status, 401);
  EXPECT_EQ(call(port, "GET", "/v1/completions", "Basic c2stcmlnaHQ=").status, 401);
  EXPECT_EQ(call(port, "POST", "/tokenize", "", R"({"prompt":"x"})").status, 401);
  EXPECT_EQ(call(port, "POST", "/detokenize", "Bearer nope", R"({"tokens":[1]})").status, 401);
  EXPECT_EQ(up.posts(), 0);
  // AND the probes and metrics stay open
  EXPECT_EQ(call(port, "GET", "/health", "").status, 200);
  EXPECT_EQ(call(port, "GET", "/ready", "").status, 200);
  EXPECT_EQ(call(port, "GET", "/scaling", "").status, 200);
  EXPECT_EQ(metric(port, "disagg_router_auth_rejected_total{reason=\"missing\"}"), 4);
  EXPECT_EQ(metric(port, "disagg_router_auth_rejected_total{reason=\"invalid\"}"), 2);
  // WHEN the right key comes
  const Reply ok = call(port, "POST", "/v1/completions", "Bearer sk-right", kCompletion);
  // THEN the request is proxied, and the worker got no Authorization header
  EXPECT_EQ(ok.status, 200) << ok.head << ok.body;
  EXPECT_NE(ok.body.find("text_completion"), std::string::npos);
  EXPECT_EQ(up.posts(), 1);
  EXPECT_FALSE(up.authorization_seen());
  EXPECT_EQ(call(port, "GET", "/v1/models", "bearer sk-right").status, 200);
}

TEST(RouterAuth, ARotatedKeyFileIsUsedWithoutARestart) {
  Upstream up;
  KeyFile keys("sk-first\n");
  RunningRouter router(config_for(up.port(), keys.path()));
  const std::uint16_t port = router.port();
  ASSERT_EQ(call(port, "GET", "/v1/models", "Bearer sk-first").status, 200);
  // WHEN the Secret is rotated
  keys.write("sk-second\n");
  // THEN within a few seconds the new key works and the old one does not
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    std::this_thread::sleep_for(50ms);
    status = call(port, "GET", "/v1/models", "Bearer sk-second").status;
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(call(port, "GET", "/v1/models", "Bearer sk-first").status, 401);
  EXPECT_EQ(metric(port, "disagg_router_auth_key_reloads_total{outcome=\"loaded\"}"), 1);
  // WHEN a rotation leaves the file without keys THEN the last good key stays in use
  keys.write("# emptied by mistake\n");
  double failed = 0;
  for (int i = 0; i < 100 && failed < 1; ++i) {
    std::this_thread::sleep_for(50ms);
    failed = metric(port, "disagg_router_auth_key_reloads_total{outcome=\"failed\"}");
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(call(port, "GET", "/v1/models", "Bearer sk-second").status, 200);
}

TEST(RouterAuth, AMissingOrEmptyKeyFileStopsTheStart) {
  // GIVEN key files that cannot serve
  KeyFile empty("# no keys yet\n");
  const std::string missing = empty.path() + ".absent";
  for (const std::string& path : {missing, empty.path()}) {
    // WHEN a router is created with one THEN it refuses to start, naming the file and the fix
    auto r = Router::create(config_for(9, path));
    ASSERT_FALSE(r.has_value()) << path;
    EXPECT_NE(r.error().find("'router.apiKeys.file' (" + path + ")"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("mount the Secret"), std::string::npos) << r.error();
  }
}

}  // namespace
}  // namespace disagg::router
