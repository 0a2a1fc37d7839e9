// peer_link.h — peer routers' snapshot exchange (peer_snapshot.h) over its own TCP listener.
//
// The listener (router.peerPort, --peer-port) is not the client-facing API port: a gateway exposes
// that one to clients, while this one is for the routers of the same deployment only. It speaks
// just enough HTTP/1.1 for curl and probes: `GET /snapshot` answers 200 with the encoded snapshot
// (application/octet-stream, Connection: close); `GET /snapshot?endpoints=L1,L2` the same restricted
// to the endpoints labelled L1, L2 (percent-encoded or not; at most kMaxRoutingEndpoints labels),
// for an endpoint a router first sees late; another request, 404. One connection at a time on one
// thread, each bounded: 4 KiB of request head, `timeout_ms` for the whole exchange. A whole snapshot
// is made at most once a second (later requests within the second get the same bytes); a
// restricted one each time (its endpoints' blocks only).
//
// fetch_peer_snapshot() resolves the peers' DNS name (DnsDiscovery::resolve: every A / AAAA record
// is one peer router), asks each address in turn (at most kMaxPeerAddresses) and returns the first
// snapshot that decodes within the limits and is not this router's own (instance id). Each try is
// bounded by `timeout_ms` (connect, send, read) and `limits.max_bytes`, all of them together by
// `total_ms` when > 0. Failure: why, in words (the caller logs it and starts cold).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "disagg/expected.h"
#include "peer_snapshot.h"

namespace disagg::router {

inline constexpr std::size_t kMaxPeerAddresses = 8;

class PeerSnapshotServer {
 public:
  /// `make` builds the snapshot's bytes for one request (on the server's thread): every endpoint's
  /// when `only` is empty, else those labelled as one of `only`.
  using MakeSnapshot = std::function<std::string(const std::vector<std::string>& only)>;
  /// Binds `host`:`port` (0: any free port, see port()). Error: why, with the fix.
  static Expected<std::unique_ptr<PeerSnapshotServer>, std::string> create(const std::string& host, std::uint16_t port,
                                                                           std::int64_t timeout_ms, MakeSnapshot make);
  ~PeerSnapshotServer();
  PeerSnapshotServer(const PeerSnapshotServer&) = delete;
  PeerSnapshotServer& operator=(const PeerSnapshotServer&) = delete;

  void start();
  /// Stops and joins the thread, closes the listener (idempotent).
  void stop();
  std::uint16_t port() const { return port_; }

 private:
  PeerSnapshotServer() = default;
  void run();
  void serve(int fd);

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::int64_t timeout_ms_ = 2'000;
  MakeSnapshot make_;
  // The last snapshot made and when: reused for a second, so that a client asking in a loop cannot
  // hold the router's routing lock (under which the snapshot is made) much of the time.
  std::string cached_;
  std::int64_t cached_at_ms_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

/// Fetches one live peer's snapshot from `host` (DNS name or address) port `port`, skipping a
/// snapshot whose instance is `own_instance`. Error: why none was loaded (every address's reason).
/// `only`: ask for those endpoints' entries alone (labels as the router names them); empty: all.
Expected<PeerSnapshot, std::string> fetch_peer_snapshot(const std::string& host, std::uint16_t port,
                                                        std::uint64_t own_instance, std::int64_t timeout_ms,
                                                        const PeerSnapshotLimits& limits,
                                                        const std::vector<std::string>& only = {},
                                                        std::int64_t total_ms = 0);

}  // namespace disagg::router
