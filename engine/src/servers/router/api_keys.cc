// api_keys.cc — see api_keys.h.
#include "api_keys.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "router_log.h"

namespace disagg::router {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::atomic<std::uint64_t> next_instance{1};

}  // namespace

Expected<std::vector<std::string>, std::string> parse_api_keys(std::string_view text) {
  std::vector<std::string> keys;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::string_view key = trim(raw);
    if (key.empty() || key.front() == '#') continue;
    const std::string at = "line " + std::to_string(line_no);
    if (key.size() > kMaxApiKeyBytes) {
      return unexpected(at + ": a key of " + std::to_string(key.size()) + " bytes is longer than " +
                        std::to_string(kMaxApiKeyBytes) + "; use a shorter key");
    }
    for (const char c : key) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        return unexpected(at +
                          ": the key holds a control character, which no HTTP header can carry; "
                          "write each key as printable text on a line of its own");
      }
    }
    if (keys.size() == kMaxApiKeys) {
      return unexpected(at + ": more than " + std::to_string(kMaxApiKeys) +
                        " keys; keep the ones in use (each request is compared with every key)");
    }
    keys.emplace_back(key);
  }
  return keys;
}

bool requires_api_key(std::string_view path) {
  // vLLM's middleware guards every path starting with /v1 (vllm/entrypoints/openai/api_server.py,
  // AuthenticationMiddleware); its /tokenize and /detokenize sit outside /v1 but read prompts too.
  return path.starts_with("/v1") || path == "/tokenize" || path == "/detokenize";
}

std::string_view to_string(AuthResult r) {
  switch (r) {
    case AuthResult::ok: return "ok";
    case AuthResult::missing: return "missing";
    case AuthResult::invalid: return "invalid";
  }
  return "unknown";
}

ApiKeys::ApiKeys(std::string path) : path_(std::move(path)), id_(next_instance.fetch_add(1)) {}

ApiKeys::~ApiKeys() = default;

Expected<std::shared_ptr<const ApiKeys::KeySet>, std::string> ApiKeys::read() const {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return unexpected(std::string("cannot open it (") + std::strerror(errno) + ")");
  // A Secret's key file is small; a bound keeps a wrong mount (a device, a huge file) from filling memory.
  constexpr std::size_t kMaxFileBytes = kMaxApiKeys * (kMaxApiKeyBytes + 2) + 64 * 1024;
  std::string buf(kMaxFileBytes + 1, '\0');
  in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (in.bad()) return unexpected(std::string("cannot read it (") + std::strerror(errno) + ")");
  buf.resize(static_cast<std::size_t>(in.gcount()));
  if (buf.size() > kMaxFileBytes) {
    return unexpected("it is larger than " + std::to_string(kMaxFileBytes) + " bytes; it should hold one key per line");
  }
  auto keys = parse_api_keys(buf);
  if (!keys) return unexpected(std::move(keys).error());
  if (keys->empty()) {
    return unexpected(std::string("it holds no key (only blank lines and comments); put one key per line"));
  }
  auto set = std::make_shared<KeySet>();
  set->slots.resize(keys->size());
  for (std::size_t i = 0; i < keys->size(); ++i) {
    const std::string& k = (*keys)[i];
    set->slots[i].length = static_cast<std::uint32_t>(k.size());
    std::memcpy(set->slots[i].bytes.data(), k.data(), k.size());
  }
  // The parsed copies held the keys in ordinary strings: wipe them before they are freed.
  for (std::string& k : *keys) std::fill(k.begin(), k.end(), '\0');
  std::fill(buf.begin(), buf.end(), '\0');
  return std::shared_ptr<const KeySet>(std::move(set));
}

namespace {

// stat() follows symlinks: a kubelet swap of `..data` shows as another inode. False: stat failed.
template <class Stamp>
bool stamp_of(const std::string& path, Stamp* out, int* err) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *err = errno;
    return false;
  }
  out->dev = static_cast<std::uint64_t>(st.st_dev);
  out->ino = static_cast<std::uint64_t>(st.st_ino);
  out->size = static_cast<std::uint64_t>(st.st_size);
  out->mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  out->ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  return true;
}

}  // namespace

Expected<std::unique_ptr<ApiKeys>, std::string> ApiKeys::load(std::string path) {
  std::unique_ptr<ApiKeys> k(new ApiKeys(std::move(path)));
  const std::string fix =
      "; mount the Secret with the keys there (one per line), or remove router.apiKeys / --api-key-file "
      "(the router does not start unauthenticated when keys were asked for)";
  int err = 0;
  if (!stamp_of(k->path_, &k->stamp_, &err)) {
    return unexpected("'router.apiKeys.file' (" + k->path_ + "): cannot stat it (" + std::strerror(err) + ")" + fix);
  }
  auto set = k->read();
  if (!set) return unexpected("'router.apiKeys.file' (" + k->path_ + "): " + set.error() + fix);
  k->current_ = std::move(*set);
  return k;
}

ApiKeys::Refresh ApiKeys::refresh() {
  Stamp now;
  int err = 0;
  const auto keep = [this] {
    const std::size_t n = size();
    return "; the " + std::to_string(n) + (n == 1 ? " key loaded before stays" : " keys loaded before stay") +
           " in use until it holds keys again (one key per line)";
  };
  if (!stamp_of(path_, &now, &err)) {
    // Not recorded: a file that comes back (a swap under way, a remount) is read then.
    if (stat_failing_) return Refresh::unchanged;
    stat_failing_ = true;
    log_line("API key file " + path_ + ": cannot stat it (" + std::strerror(err) + ")" + keep());
    return Refresh::failed;
  }
  stat_failing_ = false;
  if (now == stamp_) return Refresh::unchanged;
  stamp_ = now;  // a bad version is read once, not every second
  auto set = read();
  if (!set) {
    log_line("API key file " + path_ + ": " + set.error() + keep());
    return Refresh::failed;
  }
  const std::size_t n = (*set)->slots.size();
  {
    std::lock_guard lock(mu_);
    current_ = std::move(*set);
  }
  version_.fetch_add(1, std::memory_order_release);
  log_line("API keys reloaded from " + path_ + ": " + std::to_string(n) + (n == 1 ? " key" : " keys"));
  return Refresh::reloaded;
}

std::size_t ApiKeys::size() const {
  std::lock_guard lock(mu_);
  return current_->slots.size();
}

AuthResult ApiKeys::check(std::string_view authorization) const {
  // Scheme "Bearer" (case-insensitive, RFC 6750), then the key after the spaces that follow.
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') return AuthResult::missing;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c) != kScheme[i]) return AuthResult::missing;
  }
  std::string_view key = authorization.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  if (key.empty()) return AuthResult::missing;

  // This thread's view of the current set: refreshed under the lock only after a reload.
  struct Cache {
    std::uint64_t owner = 0;
    std::uint64_t version = 0;
    std::shared_ptr<const KeySet> set;
  };
  thread_local Cache cache;
  const std::uint64_t version = version_.load(std::memory_order_acquire);
  if (cache.owner != id_ || cache.version != version || !cache.set) {
    std::lock_guard lock(mu_);
    cache.set = current_;
    cache.owner = id_;
    cache.version = version;
  }

  // The presented key, zero-padded to the fixed width every comparison runs over. A longer one
  // matches nothing (its length differs from every key's) but is compared all the same.
  std::array<unsigned char, kMaxApiKeyBytes> presented{};
  const std::size_t n = std::min(key.size(), kMaxApiKeyBytes);
  std::memcpy(presented.data(), key.data(), n);
  const auto presented_length = static_cast<std::uint32_t>(std::min<std::size_t>(key.size(), kMaxApiKeyBytes + 1));
  std::uint32_t match = 0;
  for (const Slot& s : cache.set->slots) {
    std::uint32_t diff = s.length ^ presented_length;
    for (std::size_t i = 0; i < kMaxApiKeyBytes; ++i) diff |= static_cast<std::uint32_t>(s.bytes[i] ^ presented[i]);
    // 1 when diff is 0, without a branch (diff < 2^31).
    match |= ((diff - 1U) >> 31) & 1U;
  }
  return match != 0 ? AuthResult::ok : AuthResult::invalid;
}

}  // namespace disagg::router
