// Redis command semantics on top of TieredStore: argument checking, replies, AUTH gating.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metrics.h"
#include "reply_queue.h"
#include "resp_parser.h"
#include "server_config.h"
#include "tiered_store.h"

namespace disagg::kvstore {

/// Per-connection state the commands read and change.
struct Session {
  std::uint64_t id = 0;
  bool authenticated = false;
  bool close_after_reply = false;  ///< set by QUIT
  std::string name;                ///< CLIENT SETNAME
  /// A GET whose value is being read from disk off-thread (async disk reads only): its reply is
  /// still owed; the server answers it with CommandExecutor::finish_get() before reading on.
  bool read_pending = false;
  DiskRead pending_read;
  double pending_since = 0;  ///< monotonic seconds, for the latency histogram
};

class CommandTable;

class CommandExecutor {
 public:
  CommandExecutor(TieredStore* store, const ServerConfig* config, ServerCounters* counters);
  ~CommandExecutor();

  /// Executes one command (args non-empty) and appends exactly one reply to `out` (but see
  /// set_async_disk_reads()).
  /// Unknown commands, wrong arity and bad options get an error reply; nothing throws except
  /// std::bad_alloc.
  /// `payloads`: arguments the parser received into their own Blobs (SET / MSET store those
  /// as they are instead of copying the bytes).
  void execute(const std::vector<std::string_view>& args, Session* session, ReplyQueue* out,
               const std::vector<PayloadArg>* payloads = nullptr);

  /// With async disk reads, a GET that hits the disk tier sets session->read_pending and appends
  /// no reply yet (MGET stays synchronous). Off by default.
  void set_async_disk_reads(bool on) { async_disk_reads_ = on; }
  /// Appends the reply of the session's pending GET given the read's outcome; clears read_pending.
  void finish_get(Session* session, DiskError error, Blob loaded, ReplyQueue* out);

  /// Current time in Unix milliseconds (expiry clock).
  static std::int64_t now_ms();

 private:
  friend class CommandTable;
  void error(ReplyQueue* out, std::string_view message);
  void reply_store_status(StoreStatus status, ReplyQueue* out);
  // SET of args[i]: stores its payload Blob when it has one (scanning from *cursor, since payloads
  // are in argument order), else copies the view.
  StoreStatus store_arg(std::string_view key, const std::vector<std::string_view>& args, std::size_t i,
                        std::size_t* cursor, std::int64_t expire_at_ms, std::int64_t now_ms, SetCondition condition,
                        bool keep_ttl);
  TieredStore* store_;
  const ServerConfig* config_;
  ServerCounters* counters_;
  std::int64_t started_ms_;
  std::vector<std::string> scratch_keys_;
  const std::vector<PayloadArg>* payloads_ = nullptr;  // of the command being executed
  bool async_disk_reads_ = false;
};

}  // namespace disagg::kvstore
