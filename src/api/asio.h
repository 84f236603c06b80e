// Include this before any Boost.Asio header: Boost 1.74's awaitable.hpp uses std::exchange
// without including <utility>, which GCC 12 in C++20 mode rejects.
#pragma once

#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
