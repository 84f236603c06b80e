// https for the client side of the API: TLS 1.2 or later, the server's certificate checked
// against the system's CAs (or TRAINQ_CA) for the URL's host. The daemon links this file; the
// client loads it as a module (trainq-tls.so) the first time it calls an https URL, so no
// other command loads OpenSSL (docs/benchmarks.md, "Start-up").
#include "src/api/tls_call.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>
#include <boost/asio/ssl.hpp>

#include "src/api/http_call.h"
#include "src/api/tls_client.h"

namespace trainq {

using namespace http_call;  // NOLINT: this file is the rest of http_client.cc
namespace ssl = asio::ssl;

// Verification of the server's name: its IP address when the URL gives one, else its DNS
// name, which is also sent as SNI.
void ExpectServerName(SSL* ssl_handle, const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle), host.c_str());
    return;
  }
  SSL_set1_host(ssl_handle, host.c_str());
  SSL_set_tlsext_host_name(ssl_handle, host.c_str());
}

Result<std::unique_ptr<ssl::context>> ClientTlsContext(const std::string& ca_file,
                                                       const std::string& ca_name) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  beast::error_code ec;
  // As curl's --cacert: a CA file named replaces the system's store. Reading the store (all
  // of ca-certificates) costs ~20 ms, a third of a TLS submit, and a lab's own CA is the case.
  if (ca_file.empty()) ctx->set_default_verify_paths(ec);  // none is no error: a refusal says
  if (!ca_file.empty()) {
    ctx->load_verify_file(ca_file, ec);
    if (ec) {
      return Status::Invalid(fmt::format("{}: the CA certificate file {} cannot be used: {}",
                                         ca_name, ca_file, ec.message()));
    }
  }
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

Status HandshakeFailed(const Endpoint& endpoint, SSL* ssl_handle, const beast::error_code& ec,
                       bool expired, const std::string& ca_name) {
  long verdict = SSL_get_verify_result(ssl_handle);
  if (verdict != X509_V_OK) {
    return Status::Permission(
        "the TLS certificate of " + endpoint.Describe() + " does not verify (" +
        X509_verify_cert_error_string(verdict) +
        "); nothing was sent. If the server's certificate is signed by your own CA, set " +
        ca_name + " to the CA certificate file");
  }
  return Status::Unavailable("TLS handshake with " + endpoint.Describe() +
                             " failed: " + (expired ? std::string("timed out") : ec.message()) +
                             "; is it serving https?");
}

Result<HttpResponse> TlsCall(const Endpoint& endpoint, std::string_view method,
                             std::string_view target, const std::string& body,
                             const CallOptions& options, std::string_view host) {
  Call call(options.timeout_ms);
  Request req = MakeRequest(method, target, body, options, host);
  Result<std::unique_ptr<ssl::context>> ctx = ClientTlsContext(options.ca_file, options.ca_name);
  if (!ctx.ok()) return ctx.status();
  ssl::stream<Tcp::socket> stream(call.io(), **ctx);
  call.Arm(stream.next_layer());
  ExpectServerName(stream.native_handle(), endpoint.host);
  TRAINQ_RETURN_IF_ERROR(
      ConnectTcp(endpoint, stream.next_layer(), call, options.connect_timeout_ms));
  beast::error_code ec = call.Await(
      [&](auto handler) { stream.async_handshake(ssl::stream_base::client, std::move(handler)); });
  if (ec)
    return HandshakeFailed(endpoint, stream.native_handle(), ec, call.expired(), options.ca_name);
  // No close_notify after the answer: it is complete, and the connection closes with us.
  return Exchange(call, stream, req);
}

#ifdef TRAINQ_TLS_MODULE
// The module's one entry (tls_call.h). Nothing may be thrown across it.
extern "C" __attribute__((visibility("default"))) void trainq_tls_call_v1(
    const Endpoint& endpoint, const TlsCallArgs& args, Result<HttpResponse>& out) {
  try {
    out = TlsCall(endpoint, args.method, args.target, *args.body, *args.options, args.host);
  } catch (const std::exception& e) {
    out = Status::Internal(std::string("https call failed: ") + e.what());
  }
}
#endif

Status CheckCaFile(const std::string& path, const std::string& name) {
  // OpenSSL says only "asio.ssl error" of a file it cannot open: the file is opened first.
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
  } else {
    return Status::Invalid(fmt::format("{}: the CA certificate file {} cannot be read: {}", name,
                                       path, std::strerror(errno)));
  }
  return ClientTlsContext(path, name).status();
}

}  // namespace trainq
