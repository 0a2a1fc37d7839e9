// asio.h — the one place the HTTP layer includes Boost.Asio and Boost.Beast.
//
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>; g++ 12's
// standard library no longer pulls it in transitively, so it must come first.
#pragma once

#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace disagg::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;

/// Coroutine type of every asynchronous call of the HTTP layer.
template <class T>
using Task = boost::asio::awaitable<T>;

}  // namespace disagg::http
