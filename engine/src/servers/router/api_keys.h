// api_keys.h — the router's API keys (router.apiKeys.file, --api-key-file), as vLLM's --api-key
// checks them: a request to /v1/..., /tokenize or /detokenize needs `Authorization: Bearer <key>`
// with one of the keys; /health, /ready, /metrics and /scaling stay open (requires_api_key()).
//
// The file holds one key per line; blank lines and lines starting with '#' are skipped and
// surrounding whitespace is trimmed. It is meant to be a mounted Kubernetes Secret: the kubelet
// rotates such a volume by swapping its `..data` symlink, so refresh() stats the path (following
// symlinks) and re-reads it when its identity or times change. A re-read that fails or holds no
// key keeps the last good set (logged once per failing streak). At start, a missing, unreadable or
// empty file is an error: the router fails closed rather than serve unauthenticated.
//
// check() is the request path: no lock and no allocation once a thread has seen the current set,
// and its time does not depend on the keys' contents: the presented key is compared with every key,
// each over kMaxApiKeyBytes zero-padded bytes, and the results are OR-ed without an early exit.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/expected.h"

namespace disagg::router {

/// Keys in one file; each check compares the presented key with all of them.
inline constexpr std::size_t kMaxApiKeys = 64;
/// Longest key, in bytes (OpenAI-style keys are about 50-170).
inline constexpr std::size_t kMaxApiKeyBytes = 256;

/// The keys of a key file's text, in file order. Error (a line number, never the key; and the fix):
/// a key longer than kMaxApiKeyBytes, a key with a control character, more than kMaxApiKeys keys.
/// Zero keys is not an error here (ApiKeys decides).
Expected<std::vector<std::string>, std::string> parse_api_keys(std::string_view text);

/// Whether a request to `path` (the target's path, without the query) needs a key: vLLM's rule,
/// every path under /v1, plus /tokenize and /detokenize.
bool requires_api_key(std::string_view path);

enum class AuthResult : std::uint8_t {
  ok,
  missing,  ///< no Authorization header, or not the Bearer scheme
  invalid,  ///< a Bearer key that matches none of the keys
};
/// "ok", "missing", "invalid" (the `reason` label of disagg_router_auth_rejected_total).
std::string_view to_string(AuthResult r);

class ApiKeys {
 public:
  /// Reads `path`. Error (names the path and the fix): the file is missing or unreadable, a line is
  /// refused by parse_api_keys(), or it holds no key.
  static Expected<std::unique_ptr<ApiKeys>, std::string> load(std::string path);
  ~ApiKeys();
  ApiKeys(const ApiKeys&) = delete;
  ApiKeys& operator=(const ApiKeys&) = delete;

  /// Checks an Authorization header's value (empty: absent). Thread-safe; see the file comment for
  /// its cost. The Bearer scheme is case-insensitive; spaces before the key are skipped.
  AuthResult check(std::string_view authorization) const;

  enum class Refresh : std::uint8_t { unchanged, reloaded, failed };
  /// Stats the file and re-reads it when it changed. `reloaded`: the new keys are used from now on.
  /// `failed` (logged): a changed file that cannot be read or holds no key, or the first of a run of
  /// failed stats; the keys loaded before stay. `unchanged`: anything else (a stat that keeps
  /// failing included). One caller at a time (the router's timer); concurrent with check().
  Refresh refresh();

  /// Keys in use now.
  std::size_t size() const;
  const std::string& path() const { return path_; }

 private:
  struct Slot {
    std::uint32_t length = 0;
    std::array<unsigned char, kMaxApiKeyBytes> bytes{};
  };
  struct KeySet {
    std::vector<Slot> slots;
  };
  // What identifies one version of the file: a kubelet swap changes the inode, an edit in place
  // the size or times.
  struct Stamp {
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  explicit ApiKeys(std::string path);
  // Reads and parses the file; error: why (names the path), for load() and the log.
  Expected<std::shared_ptr<const KeySet>, std::string> read() const;

  std::string path_;
  Stamp stamp_;
  bool stat_failing_ = false;  // the file could not be stat'ed (logged once per run)
  // The set in use. Replaced under mu_; check() copies the pointer under mu_ only when version_ moved
  // since its thread last looked (a thread-local cache), so the request path takes no lock.
  mutable std::mutex mu_;
  std::shared_ptr<const KeySet> current_;
  std::atomic<std::uint64_t> version_{1};
  const std::uint64_t id_;  // tells instances apart in the thread-local cache
};

}  // namespace disagg::router
