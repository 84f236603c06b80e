// The far end of a switched connection (HttpResponse::tunnel), for http_server.cc: a Unix
// socket on this machine, or another server that switched too (over http or https). Asio is
// here, so only the server's files include it.
#pragma once

#include "src/api/asio.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include "src/api/http.h"

namespace trainq::tunnel {

// One open far end. Its calls run on the executor it was opened on; one read and one write
// may be outstanding at once.
class FarEnd {
 public:
  using ReadDone = std::function<void(boost::system::error_code, size_t)>;
  using WriteDone = std::function<void(boost::system::error_code)>;
  virtual ~FarEnd() = default;
  virtual void ReadSome(boost::asio::mutable_buffer into, ReadDone done) = 0;
  virtual void WriteAll(boost::asio::const_buffer bytes, WriteDone done) = 0;
  // No more bytes to it: it reads the end of the stream (TCP: a FIN, no TLS close_notify).
  virtual void ShutdownSend() = 0;
  virtual void Close() = 0;
  // Bytes that arrived with another server's 101, to be passed on before any read.
  std::string early;
};

// The far end, or the answer the client gets instead: the other server's own when it did
// not switch, else 503 naming `target.what` and why it cannot be reached.
struct Opened {
  std::shared_ptr<FarEnd> far;
  HttpResponse refusal;
};

// Opens `target` within its options' timeout and calls `done` once, on `executor`.
void Open(boost::asio::any_io_executor executor, std::shared_ptr<const TunnelTarget> target,
          std::function<void(Opened)> done);

}  // namespace trainq::tunnel
