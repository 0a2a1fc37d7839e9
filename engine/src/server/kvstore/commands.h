// Redis command semantics on top of TieredStore: argument checking, replies, AUTH gating.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metrics.h"
#include "reply_queue.h"
#include "server_config.h"
#include "tiered_store.h"

namespace disagg::kvstore {

/// Per-connection state the commands read and change.
struct Session {
  std::uint64_t id = 0;
  bool authenticated = false;
  bool close_after_reply = false;  ///< set by QUIT
  std::string name;                ///< CLIENT SETNAME
};

class CommandTable;

class CommandExecutor {
 public:
  CommandExecutor(TieredStore* store, const ServerConfig* config, ServerCounters* counters);
  ~CommandExecutor();

  /// Executes one command (args non-empty) and appends exactly one reply to `out`.
  /// Unknown commands, wrong arity and bad options get an error reply; nothing throws except
  /// std::bad_alloc.
  void execute(const std::vector<std::string_view>& args, Session* session, ReplyQueue* out);

  /// Current time in Unix milliseconds (expiry clock).
  static std::int64_t now_ms();

 private:
  friend class CommandTable;
  void error(ReplyQueue* out, std::string_view message);
  void reply_store_status(StoreStatus status, ReplyQueue* out);
  TieredStore* store_;
  const ServerConfig* config_;
  ServerCounters* counters_;
  std::int64_t started_ms_;
  std::vector<std::string> scratch_keys_;
};

}  // namespace disagg::kvstore
