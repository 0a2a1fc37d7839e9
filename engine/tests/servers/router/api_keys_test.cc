// The router's API keys (api_keys.h): the key file's text (comments, blanks, whitespace, bounds),
// the start-time errors that keep a router from serving unauthenticated, the checks of an
// Authorization header, and rotation: a file rewritten in place and a kubelet-style `..data`
// symlink swap are picked up by refresh(), a bad version keeps the last good keys.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "api_keys.h"

namespace disagg::router {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system's temporary one, removed at the end of the test.
class KeyDir {
 public:
  KeyDir() {
    path_ = fs::temp_directory_path() /
            ("disagg-api-keys-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::create_directories(path_);
  }
  ~KeyDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }
  const fs::path& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path path_;
};

TEST(ApiKeysParse, SkipsCommentsAndBlankLinesAndTrims) {
  // GIVEN a file with comments, blank lines, CRLF endings and indentation
  const auto keys = parse_api_keys("# rotated 2026-01-01\n\n  sk-one  \r\n\t# old key below\r\nsk-two\n   \nsk-three");
  // THEN only the keys come out, trimmed, in file order
  ASSERT_TRUE(keys.has_value()) << keys.error();
  EXPECT_EQ(*keys, (std::vector<std::string>{"sk-one", "sk-two", "sk-three"}));
  EXPECT_TRUE(parse_api_keys("# nothing\n\n").value().empty());
  // AND a key may hold inner spaces (vLLM compares whatever follows "Bearer ")
  EXPECT_EQ(parse_api_keys("a b\n").value(), (std::vector<std::string>{"a b"}));
}

TEST(ApiKeysParse, RefusesWhatCouldNeverMatchNamingTheLineNotTheKey) {
  // A key longer than the bound, one with a control character, too many keys.
  const std::string long_key(kMaxApiKeyBytes + 1, 'k');
  auto r = parse_api_keys("ok\n" + long_key + "\n");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("line 2"), std::string::npos) << r.error();
  EXPECT_EQ(r.error().find(long_key), std::string::npos);
  r = parse_api_keys("sk-a\x01secret\n");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("line 1"), std::string::npos);
  EXPECT_EQ(r.error().find("secret"), std::string::npos) << r.error();
  std::string many;
  for (std::size_t i = 0; i <= kMaxApiKeys; ++i) many += "key-" + std::to_string(i) + "\n";
  r = parse_api_keys(many);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("more than 64 keys"), std::string::npos) << r.error();
  EXPECT_TRUE(parse_api_keys(std::string(kMaxApiKeyBytes, 'k')).has_value());
}

TEST(ApiKeysLoad, MissingEmptyOrBadFilesAreStartErrorsNamingThePathAndTheFix) {
  KeyDir dir;
  const std::string missing = (dir.path() / "absent").string();
  for (const std::string& path :
       {missing, dir.write("empty", "").string(), dir.write("comments", "# only\n\n").string(),
        dir.write("control", "sk-\x7f\n").string()}) {
    auto k = ApiKeys::load(path);
    ASSERT_FALSE(k.has_value()) << path;
    EXPECT_NE(k.error().find("'router.apiKeys.file' (" + path + ")"), std::string::npos) << k.error();
    EXPECT_NE(k.error().find("mount the Secret"), std::string::npos) << k.error();
  }
  EXPECT_NE(ApiKeys::load(dir.path().string() + "/empty").error().find("holds no key"), std::string::npos);
  EXPECT_NE(ApiKeys::load(missing).error().find("No such file"), std::string::npos);
}

TEST(ApiKeysCheck, BearerKeysMatchExactly) {
  KeyDir dir;
  auto loaded = ApiKeys::load(dir.write("keys", "sk-alpha\nsk-beta-longer\n").string());
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  const ApiKeys& k = **loaded;
  EXPECT_EQ(k.size(), 2U);
  // Either key, the scheme in any case, extra spaces before the key.
  EXPECT_EQ(k.check("Bearer sk-alpha"), AuthResult::ok);
  EXPECT_EQ(k.check("Bearer sk-beta-longer"), AuthResult::ok);
  EXPECT_EQ(k.check("bearer sk-alpha"), AuthResult::ok);
  EXPECT_EQ(k.check("BEARER   sk-alpha"), AuthResult::ok);
  // No header, another scheme, no key: missing.
  for (const char* h : {"", "Bearer", "Bearer ", "Bearer    ", "Basic c2stYWxwaGE=", "sk-alpha", "Bearersk-alpha"}) {
    EXPECT_EQ(k.check(h), AuthResult::missing) << h;
  }
  // A prefix, an extension, another case, a key of the other's length: invalid.
  for (const char* h :
       {"Bearer sk-alph", "Bearer sk-alphaa", "Bearer SK-ALPHA", "Bearer sk-alphx", "Bearer sk-beta-longe"}) {
    EXPECT_EQ(k.check(h), AuthResult::invalid) << h;
  }
  // Longer than any key can be: compared all the same, and refused.
  EXPECT_EQ(k.check("Bearer " + std::string(kMaxApiKeyBytes, 'a') + "sk-alpha"), AuthResult::invalid);
  EXPECT_EQ(k.check("Bearer " + std::string(kMaxApiKeyBytes + 1, 'a')), AuthResult::invalid);
}

TEST(ApiKeysCheck, GuardsVllmsPaths) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/v1", "/tokenize", "/detokenize"}) {
    EXPECT_TRUE(requires_api_key(p)) << p;
  }
  for (const char* p : {"/health", "/ready", "/ping", "/metrics", "/scaling", "/", "/tokenize/x"}) {
    EXPECT_FALSE(requires_api_key(p)) << p;
  }
}

TEST(ApiKeysRefresh, AFileRewrittenInPlaceIsReadAgainAndABadVersionKeepsTheLastGoodKeys) {
  KeyDir dir;
  const fs::path file = dir.write("keys", "sk-old\n");
  auto loaded = ApiKeys::load(file.string());
  ASSERT_TRUE(loaded.has_value());
  ApiKeys& k = **loaded;
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::unchanged);
  // WHEN the file is rewritten with a new key (another size, and a later mtime)
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  dir.write("keys", "# rotated\nsk-new-key\n");
  // THEN the next refresh loads it: the new key works, the old one does not
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::reloaded);
  EXPECT_EQ(k.check("Bearer sk-new-key"), AuthResult::ok);
  EXPECT_EQ(k.check("Bearer sk-old"), AuthResult::invalid);
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::unchanged);
  // WHEN it is emptied (a bad rotation) THEN the keys stay, and the same bad version is read once
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  dir.write("keys", "# nothing here\n");
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::failed);
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::unchanged);
  EXPECT_EQ(k.check("Bearer sk-new-key"), AuthResult::ok);
  // WHEN it disappears THEN one failure is reported, and the keys stay
  fs::remove(file);
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::failed);
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::unchanged);
  EXPECT_EQ(k.check("Bearer sk-new-key"), AuthResult::ok);
  // AND when it comes back with keys, they are used
  dir.write("keys", "sk-third\n");
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::reloaded);
  EXPECT_EQ(k.check("Bearer sk-third"), AuthResult::ok);
  EXPECT_EQ(k.check("Bearer sk-new-key"), AuthResult::invalid);
}

TEST(ApiKeysRefresh, AKubeletSymlinkSwapIsFollowed) {
  // GIVEN a Secret volume as the kubelet lays it out: keys -> ..data/keys, ..data -> ..v1
  KeyDir dir;
  fs::create_directory(dir.path() / "..v1");
  dir.write("..v1/keys", "sk-v1\n");
  fs::create_directory_symlink("..v1", dir.path() / "..data");
  fs::create_symlink("..data/keys", dir.path() / "keys");
  auto loaded = ApiKeys::load((dir.path() / "keys").string());
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  ApiKeys& k = **loaded;
  EXPECT_EQ(k.check("Bearer sk-v1"), AuthResult::ok);
  // WHEN the Secret is updated: a new folder, then ..data swapped to it by a rename (the same
  // size and possibly the same mtime second as the old file; only the inode tells them apart)
  fs::create_directory(dir.path() / "..v2");
  dir.write("..v2/keys", "sk-v2\n");
  fs::create_directory_symlink("..v2", dir.path() / "..data_tmp");
  fs::rename(dir.path() / "..data_tmp", dir.path() / "..data");
  fs::remove_all(dir.path() / "..v1");
  // THEN the new key is read through the symlinks
  EXPECT_EQ(k.refresh(), ApiKeys::Refresh::reloaded);
  EXPECT_EQ(k.check("Bearer sk-v2"), AuthResult::ok);
  EXPECT_EQ(k.check("Bearer sk-v1"), AuthResult::invalid);
}

TEST(ApiKeysCheck, ThreadsCheckingDuringReloadsEndOnTheLastVersion) {
  KeyDir dir;
  auto loaded = ApiKeys::load(dir.write("keys", "sk-a\n").string());
  ASSERT_TRUE(loaded.has_value());
  ApiKeys& k = **loaded;
  // GIVEN threads checking while the file is rewritten (sizes alternate, so each version differs)
  std::atomic<bool> stop{false};
  std::atomic<int> missing{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        if (k.check("Bearer sk-a") == AuthResult::missing) missing.fetch_add(1);
        (void)k.check("Bearer sk-bb");
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    dir.write("keys", i % 2 == 0 ? "sk-bb\n" : "sk-a\n");
    EXPECT_EQ(k.refresh(), ApiKeys::Refresh::reloaded) << i;
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(missing.load(), 0);
  // THEN a thread that checked the old versions sees the last one
  EXPECT_EQ(k.check("Bearer sk-a"), AuthResult::ok);
  EXPECT_EQ(k.check("Bearer sk-bb"), AuthResult::invalid);
}

}  // namespace
}  // namespace disagg::router
