// Helpers shared by the kvstore tests.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace disagg::kvstore::testing {

/// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvstore-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A value whose bytes depend on (key, version), so a stale or mixed-up value is detectable.
inline std::string make_value(std::mt19937_64& rng, std::size_t size) {
  std::string v(size, '\0');
  for (char& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

}  // namespace disagg::kvstore::testing
