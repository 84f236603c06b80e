// A Beast body for requests whose memory follows the bytes received, not the bytes declared.
// Included only where Beast already is (http_server.cc and its test).
#pragma once

#include "src/api/asio.h"  // first: before any Asio header

#include <cstdint>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace trainq {

// A request body that grows as its bytes arrive. Beast's string_body reserves the declared
// Content-Length up front, so 16 clients declaring 64 MiB and sending one byte held 1 GB.
struct GrowingBody {
  using value_type = std::string;

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, boost::beast::error_code& ec) { ec = {}; }
    template <class Buffers>
    size_t put(const Buffers& buffers, boost::beast::error_code& ec) {
      size_t n = 0;
      for (boost::asio::const_buffer b : boost::beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      ec = {};
      return n;
    }
    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

}  // namespace trainq
