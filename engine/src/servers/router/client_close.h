// client_close.h — what a client that closes its connection cancels.
//
// A client that closes its connection cancels what its request waits on
// (ResponseWriter::watch_close): the upstream request while it is proxied, whatever phase it is in
// (waiting for the answer's header, reading a whole answer, or streaming; the worker then sees its
// connection close and aborts), or its place in the admission queue.
#pragma once

#include "lib/http/http_server.h"

namespace disagg::router {

/// The watch's callback: `T` has cancel(); it holds one pointer, so the watch keeps it in place.
template <class T>
class CancelOnClientClose {
 public:
  explicit CancelOnClientClose(T* target) : target_(target) {}
  void operator()() const { target_->cancel(); }

 private:
  T* target_;
};

/// Ends the watch before what its callback refers to goes away.
class CloseWatchGuard {
 public:
  explicit CloseWatchGuard(http::ResponseWriter& w) : w_(w) {}
  ~CloseWatchGuard() { w_.unwatch_close(); }
  CloseWatchGuard(const CloseWatchGuard&) = delete;
  CloseWatchGuard& operator=(const CloseWatchGuard&) = delete;

 private:
  http::ResponseWriter& w_;
};

}  // namespace disagg::router
