// The kvstore network server: one epoll loop on one thread serving RESP clients and /metrics.
//
// Why one thread: values are large (KV blocks of 256 KiB - 1 MiB), so throughput is bound by
// memory copies and socket syscalls, not by command dispatch; one thread keeps the store lock-free
// and replies in order. GET replies reference stored values (no copy); SET reads values of 32 KiB
// or more straight into the Blob that is stored (no copy either; see RespParser kPayload). Replies
// are written once per epoll batch, after every ready connection's input was read and executed
// (as Redis does before it sleeps), so a client with many connections wakes once for several.
//
// Disk-tier GETs are the exception: their preads run on DiskReader I/O threads (4), so a disk hit
// does not hold up other clients. The connection that issued it reads no further commands until
// the value is back, so its replies stay in order.
//
// Limits: --max-clients (new connections beyond it get "-ERR max number of clients reached" and are
// closed), --max-value-bytes / --max-request-bytes (a longer declared length is a protocol error at
// its header: "-ERR Protocol error: invalid bulk length ...", then the connection closes, as Redis
// does), --memory-bytes for values in flight (a command of more than 32 KiB reserves its declared
// bytes in the memory tier as its headers arrive, evicting LRU entries; one that cannot fit beside
// the other values still arriving gets "-OOM ..." at once, its bytes are skipped unbuffered and the
// connection stays usable), --max-pipeline (a connection with that many unanswered replies queued is
// not read from until the client drains them: TCP backpressure).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "commands.h"
#include "disk_reader.h"
#include "metrics.h"
#include "server_config.h"
#include "tiered_store.h"

namespace disagg::kvstore {

class Server {
 public:
  /// Opens the store (recovering the disk tier) and binds both ports. nullptr + `error` on failure.
  static std::unique_ptr<Server> create(const ServerConfig& config, std::string* error);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Serves until stop() is called. Returns 0.
  int run();
  /// Asks run() to return; safe from a signal handler or another thread.
  void stop();

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int metrics_port() const { return metrics_port_; }
  [[nodiscard]] const TieredStore& store() const { return *store_; }

 private:
  struct Connection;
  struct MetricsConnection;
  explicit Server(const ServerConfig& config);

  void accept_clients();
  void accept_metrics();
  void on_client_event(Connection* c, std::uint32_t events);
  void on_metrics_event(MetricsConnection* m, std::uint32_t events);
  // Parses and executes buffered commands until input runs out or backpressure applies.
  void process_input(Connection* c);
  // Writes queued replies; updates the epoll interest set. False when the connection must close.
  bool flush(Connection* c);
  void update_interest(Connection* c);
  void close_client(Connection* c);
  // Returns the connection's in-flight reservation to the store.
  void release_reservation(Connection* c);
  // After input was processed or a disk read completed: writes replies, closes or re-arms epoll.
  void finish_event(Connection* c);
  // Queues finish_event(c) for the end of the current epoll batch (once per connection).
  void defer_finish(Connection* c);
  void finish_deferred();
  // Hands the session's pending GET to the I/O thread (or answers it at once if it cannot).
  void submit_disk_read(Connection* c);
  void on_disk_reads_done();

  ServerConfig config_;
  std::unique_ptr<TieredStore> store_;
  std::unique_ptr<CommandExecutor> executor_;
  std::unique_ptr<DiskReader> disk_reader_;  // with a disk tier only
  ServerCounters counters_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  int metrics_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes epoll_wait
  int port_ = 0;
  int metrics_port_ = 0;
  std::atomic<bool> stopping_{false};
  bool abandoned_in_flight_ = false;  // a client left mid-value: hand free memory back when quiet
  std::uint64_t next_client_id_ = 1;
  std::unordered_map<int, std::unique_ptr<Connection>> clients_;
  std::unordered_map<int, std::unique_ptr<MetricsConnection>> metrics_clients_;
  std::unordered_map<std::uint64_t, Connection*> waiting_disk_;  // by session id
  std::vector<DiskReader::Job> done_jobs_;
  std::vector<std::pair<int, std::uint64_t>> deferred_;  // (fd, session id) awaiting finish_event()
};

}  // namespace disagg::kvstore
