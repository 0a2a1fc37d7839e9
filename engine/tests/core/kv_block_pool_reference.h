// A deliberately simple model of KvBlockPool's documented behaviour (std::map, std::list, linear
// searches), used as the oracle of the differential tests. Same policy, different structure:
// allocate empty blocks in list order, then evict the front of the LRU list; release last block
// first; a released block joins the back of the LRU list when it holds a hash, else the empty list.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <vector>

namespace disagg::testing {

class ReferencePool {
 public:
  struct Plan {
    int cached = 0;
    int fresh = 0;
    int revived = 0;
    int evictions = 0;
    bool fits = false;
  };

  explicit ReferencePool(int blocks) {
    for (int id = 0; id < blocks; ++id) {
      blocks_[id] = Block{};
      empty_.push_back(id);
    }
  }

  Plan plan(const std::vector<std::uint64_t>& hashes, int total) const {
    Plan p;
    for (std::size_t i = 0; i < hashes.size() && static_cast<int>(i) < total; ++i) {
      auto it = index_.find(hashes[i]);
      if (it == index_.end()) break;
      ++p.cached;
      if (blocks_.at(it->second).ref == 0) ++p.revived;
    }
    p.fresh = total - p.cached;
    const int available = static_cast<int>(empty_.size() + lru_.size()) - p.revived;
    p.fits = p.fresh <= available;
    p.evictions = p.fits ? std::max(0, p.fresh - static_cast<int>(empty_.size())) : 0;
    return p;
  }

  // Precondition: p came from plan(hashes, ...) with no change since, and p.fits.
  std::vector<int> commit(const Plan& p, const std::vector<std::uint64_t>& hashes) {
    std::vector<int> out;
    for (int i = 0; i < p.cached; ++i) {
      const int id = index_.at(hashes[static_cast<std::size_t>(i)]);
      if (blocks_[id].ref++ == 0) lru_.remove(id);
      out.push_back(id);
    }
    for (int i = 0; i < p.fresh; ++i) {
      int id;
      if (!empty_.empty()) {
        id = empty_.front();
        empty_.pop_front();
      } else {
        id = lru_.front();
        lru_.pop_front();
        index_.erase(*blocks_[id].hash);
        blocks_[id].hash.reset();
      }
      blocks_[id].ref = 1;
      out.push_back(id);
    }
    return out;
  }

  // Returns whether the hash was indexed. Precondition: the block is in use and has no hash.
  bool publish(int id, std::uint64_t hash) {
    if (index_.count(hash) != 0) return false;
    blocks_[id].hash = hash;
    index_[hash] = id;
    return true;
  }

  // Whether release(ids) would succeed: no block would go below zero references.
  bool can_release(const std::vector<int>& ids) const {
    std::map<int, int> count;
    for (int id : ids) ++count[id];
    for (auto [id, n] : count) {
      if (blocks_.at(id).ref < n) return false;
    }
    return true;
  }

  // Returns false (and changes nothing) when a block would go below zero references.
  bool release(const std::vector<int>& ids) {
    if (!can_release(ids)) return false;
    for (int id : ids) --blocks_[id].ref;
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
      const int id = *it;
      if (blocks_[id].ref != 0 || on_free_list(id)) continue;
      (blocks_[id].hash ? lru_ : empty_).push_back(id);
    }
    return true;
  }

  void retain(const std::vector<int>& ids) {
    for (int id : ids) ++blocks_[id].ref;
  }

  int evict_all_free() {
    int n = 0;
    while (!lru_.empty()) {
      const int id = lru_.front();
      lru_.pop_front();
      index_.erase(*blocks_[id].hash);
      blocks_[id].hash.reset();
      empty_.push_back(id);
      ++n;
    }
    return n;
  }

  int used() const {
    return static_cast<int>(
        std::count_if(blocks_.begin(), blocks_.end(), [](const auto& kv) { return kv.second.ref > 0; }));
  }
  int free_blocks() const { return static_cast<int>(empty_.size() + lru_.size()); }
  int free_cached() const { return static_cast<int>(lru_.size()); }
  int cached() const { return static_cast<int>(index_.size()); }
  int ref(int id) const { return blocks_.at(id).ref; }
  const std::map<std::uint64_t, int>& index() const { return index_; }

 private:
  struct Block {
    int ref = 0;
    std::optional<std::uint64_t> hash;
  };

  bool on_free_list(int id) const {
    return std::find(empty_.begin(), empty_.end(), id) != empty_.end() ||
           std::find(lru_.begin(), lru_.end(), id) != lru_.end();
  }

  std::map<int, Block> blocks_;
  std::map<std::uint64_t, int> index_;
  std::list<int> empty_;
  std::list<int> lru_;
};

}  // namespace disagg::testing
