// peer_link.cc — see peer_link.h. Blocking sockets with poll() deadlines; no Asio, so that the
// exchange stays off the HTTP threads.
#include "peer_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include "dns_discovery.h"
#include "router_log.h"

namespace disagg::router {

namespace {

constexpr std::size_t kMaxRequestHead = 4096;
constexpr std::size_t kMaxResponseHead = 4096;

std::int64_t left_ms(std::int64_t deadline) {
  return std::max<std::int64_t>(deadline - now_ms(), 0);
}

// Waits for `events` on fd until `deadline` (now_ms() clock); false on timeout or error.
bool wait_fd(int fd, short events, std::int64_t deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const std::int64_t left = left_ms(deadline);
    if (left <= 0) return false;
    const int r = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

bool send_all(int fd, std::string_view data, std::int64_t deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Labels travel in the query: '%', ',', '[', ']' and bytes outside printable ASCII are
// percent-encoded (a label is host:port or [v6]:port).
std::string snapshot_target(const std::vector<std::string>& only) {
  std::string t = "/snapshot";
  if (only.empty()) return t;
  static constexpr char kHex[] = "0123456789ABCDEF";
  t += "?endpoints=";
  for (std::size_t i = 0; i < only.size(); ++i) {
    if (i != 0) t += ',';
    for (const char c : only[i]) {
      const auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u >= 0x7f || c == '%' || c == ',' || c == '[' || c == ']' || c == '&' || c == '#') {
        t += '%';
        t += kHex[u >> 4];
        t += kHex[u & 15];
      } else {
        t += c;
      }
    }
  }
  return t;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The labels of "?endpoints=L1,L2" in a request target's query (percent-decoded); false when the
// query is malformed or names more labels, or longer ones, than a snapshot may hold.
bool parse_endpoints_query(std::string_view query, std::vector<std::string>* out) {
  constexpr std::string_view kKey = "endpoints=";
  if (!query.starts_with(kKey)) return false;
  query.remove_prefix(kKey.size());
  out->clear();
  std::string label;
  for (std::size_t i = 0; i <= query.size(); ++i) {
    if (i == query.size() || query[i] == ',') {
      if (label.empty() || label.size() > kPeerSnapshotMaxLabel ||
          out->size() == static_cast<std::size_t>(kMaxRoutingEndpoints))
        return false;
      out->push_back(std::move(label));
      label.clear();
      continue;
    }
    if (query[i] == '%') {
      if (i + 2 >= query.size()) return false;
      const int hi = hex_value(query[i + 1]), lo = hex_value(query[i + 2]);
      if (hi < 0 || lo < 0) return false;
      label += static_cast<char>(hi * 16 + lo);
      i += 2;
      continue;
    }
    label += query[i];
  }
  return true;
}

// One try at one address: the snapshot's bytes, or why not.
Expected<std::string, std::string> fetch_one(const std::string& address, std::uint16_t port, std::int64_t timeout_ms,
                                             std::size_t max_bytes, const std::string& target) {
  const std::int64_t deadline = now_ms() + timeout_ms;
  sockaddr_storage sa{};
  socklen_t len = 0;
  if (address.find(':') != std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&sa);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    if (inet_pton(AF_INET6, address.c_str(), &a->sin6_addr) != 1) return unexpected(std::string("not an address"));
    len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&sa);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    if (inet_pton(AF_INET, address.c_str(), &a->sin_addr) != 1) return unexpected(std::string("not an address"));
    len = sizeof(sockaddr_in);
  }
  Fd s;
  s.fd = ::socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return unexpected(std::string("socket: ") + std::strerror(errno));
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    if (errno != EINPROGRESS) return unexpected(std::string("connect: ") + std::strerror(errno));
    if (!wait_fd(s.fd, POLLOUT, deadline)) return unexpected(std::string("connect timed out"));
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) return unexpected(std::string("connect: ") + std::strerror(err));
  }
  if (!send_all(s.fd, "GET " + target + " HTTP/1.1\r\nHost: peer\r\nConnection: close\r\n\r\n", deadline)) {
    return unexpected(std::string("send failed or timed out"));
  }
  std::string in;
  std::size_t body_at = std::string::npos, want = 0;
  char buf[65536];
  while (true) {
    if (body_at != std::string::npos && in.size() >= body_at + want) break;
    if (!wait_fd(s.fd, POLLIN, deadline)) return unexpected(std::string("timed out reading the answer"));
    const ssize_t n = ::recv(s.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return unexpected(std::string("connection closed before the whole snapshot"));
    in.append(buf, static_cast<std::size_t>(n));
    if (body_at == std::string::npos) {
      const std::size_t end = in.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (in.size() > kMaxResponseHead) return unexpected(std::string("answer head too long"));
        continue;
      }
      const std::string head = in.substr(0, end);
      if (head.rfind("HTTP/1.1 200", 0) != 0 && head.rfind("HTTP/1.0 200", 0) != 0) {
        return unexpected("answered " + head.substr(0, std::min<std::size_t>(head.find('\r'), 40)));
      }
      // Content-Length (case-insensitive), required.
      std::string lower = head;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const std::size_t cl = lower.find("\r\ncontent-length:");
      if (cl == std::string::npos) return unexpected(std::string("answer without Content-Length"));
      std::size_t i = cl + 17;
      while (i < lower.size() && lower[i] == ' ') ++i;
      std::size_t v = 0;
      bool digits = false;
      for (; i < lower.size() && lower[i] >= '0' && lower[i] <= '9'; ++i) {
        digits = true;
        v = v * 10 + static_cast<std::size_t>(lower[i] - '0');
        if (v > max_bytes) return unexpected("snapshot larger than " + std::to_string(max_bytes) + " bytes");
      }
      if (!digits) return unexpected(std::string("bad Content-Length"));
      body_at = end + 4;
      want = v;
      in.reserve(body_at + want);
    }
    if (body_at != std::string::npos && in.size() > body_at + want)
      return unexpected(std::string("bytes after the snapshot"));
  }
  return in.substr(body_at, want);
}

}  // namespace

Expected<std::unique_ptr<PeerSnapshotServer>, std::string> PeerSnapshotServer::create(const std::string& host,
                                                                                      std::uint16_t port,
                                                                                      std::int64_t timeout_ms,
                                                                                      MakeSnapshot make) {
  std::unique_ptr<PeerSnapshotServer> p(new PeerSnapshotServer());
  p->timeout_ms_ = timeout_ms;
  p->make_ = std::move(make);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr) {
    return unexpected("--peer-port: cannot resolve the listen address " + host);
  }
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    freeaddrinfo(res);
    if (fd >= 0) ::close(fd);
    return unexpected("--peer-port " + service + ": cannot listen (" + why + "); pass a free port, not the API port");
  }
  freeaddrinfo(res);
  sockaddr_storage bound{};
  socklen_t bl = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bl);
  p->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  p->listen_fd_ = fd;
  return p;
}

PeerSnapshotServer::~PeerSnapshotServer() {
  stop();
}

void PeerSnapshotServer::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void PeerSnapshotServer::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void PeerSnapshotServer::run() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    ::close(fd);
  }
}

void PeerSnapshotServer::serve(int fd) {
  const std::int64_t deadline = now_ms() + timeout_ms_;
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (head.size() > kMaxRequestHead || !wait_fd(fd, POLLIN, deadline)) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return;
    head.append(buf, static_cast<std::size_t>(n));
  }
  // "GET /snapshot" or "GET /snapshot?endpoints=...", then " HTTP/1.x".
  const std::string_view line = std::string_view(head).substr(0, head.find("\r\n"));
  constexpr std::string_view kGet = "GET /snapshot";
  const std::size_t target_end = line.find(' ', kGet.size());
  std::vector<std::string> only;
  const bool whole = line.starts_with("GET /snapshot ");
  const bool some = !whole && line.starts_with("GET /snapshot?") && target_end != std::string_view::npos &&
                    parse_endpoints_query(line.substr(kGet.size() + 1, target_end - kGet.size() - 1), &only);
  if (!whole && !some) {
    send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", deadline);
    return;
  }
  std::string restricted;
  if (some) {
    restricted = make_(only);
  } else if (cached_at_ms_ == 0 || now_ms() - cached_at_ms_ >= 1'000) {
    cached_ = make_({});
    cached_at_ms_ = now_ms();
  }
  const std::string& body = some ? restricted : cached_;
  const std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n";
  if (send_all(fd, out, deadline)) send_all(fd, body, deadline);
}

Expected<PeerSnapshot, std::string> fetch_peer_snapshot(const std::string& host, std::uint16_t port,
                                                        std::uint64_t own_instance, std::int64_t timeout_ms,
                                                        const PeerSnapshotLimits& limits,
                                                        const std::vector<std::string>& only, std::int64_t total_ms) {
  const std::int64_t end = total_ms > 0 ? now_ms() + total_ms : std::numeric_limits<std::int64_t>::max();
  const auto addresses = DnsDiscovery::resolve(host);
  if (!addresses || addresses->empty()) return unexpected("cannot resolve " + host);
  const std::string target = snapshot_target(only);
  std::string why;
  std::size_t tried = 0;
  for (const std::string& a : *addresses) {
    if (tried++ == kMaxPeerAddresses) break;
    const std::string at = (a.find(':') != std::string::npos ? "[" + a + "]" : a) + ":" + std::to_string(port);
    const std::int64_t left = end - now_ms();
    if (left <= 0) {
      why += (why.empty() ? "" : "; ") + at + ": not tried (" + std::to_string(total_ms) + " ms in all were spent)";
      break;
    }
    auto bytes = fetch_one(a, port, std::min(timeout_ms, left), limits.max_bytes, target);
    if (!bytes) {
      why += (why.empty() ? "" : "; ") + at + ": " + bytes.error();
      continue;
    }
    PeerSnapshot s;
    if (auto d = decode_peer_snapshot(*bytes, s, limits); !d) {
      why += (why.empty() ? "" : "; ") + at + ": " + std::string(to_string(d.error()));
      continue;
    }
    if (s.instance == own_instance) {
      why += (why.empty() ? "" : "; ") + at + ": this router itself";
      continue;
    }
    log_line("peer snapshot from " + at + ": " + std::to_string(s.endpoints.size()) + " endpoints, " +
             std::to_string(s.block_count()) + " blocks, " + std::to_string(bytes->size()) + " bytes");
    return s;
  }
  return unexpected(why);
}

}  // namespace disagg::router
