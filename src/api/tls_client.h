// The client side of TLS, shared by tls_call.cc (one call) and tunnel.cc (a switched
// connection to another node). Asio's SSL is here, so only those two include it.
#pragma once

#include <memory>
#include <string>

#include <openssl/ssl.h>
#include <boost/asio/ssl.hpp>

#include "src/core/endpoint.h"
#include "trainq/status.h"

namespace trainq {

// TLS 1.2 or later, the server verified against `ca_file` (replacing the system's CAs) or
// the system's; kInvalid naming `ca_name` when the file cannot be used.
Result<std::unique_ptr<boost::asio::ssl::context>> ClientTlsContext(const std::string& ca_file,
                                                                    const std::string& ca_name);
// The name the server's certificate must hold: `host`'s IP address, or its DNS name (also
// sent as SNI).
void ExpectServerName(SSL* ssl_handle, const std::string& host);
// Why a handshake with `endpoint` failed: kPermission for a certificate that does not verify
// (naming `ca_name`), else kUnavailable.
Status HandshakeFailed(const Endpoint& endpoint, SSL* ssl_handle,
                       const boost::system::error_code& ec, bool expired,
                       const std::string& ca_name);

}  // namespace trainq
