// https calls (tls_call.cc). The daemon links them; the client (built with TRAINQ_TLS_MODULE)
// loads them from the module trainq-tls.so on its first https call, so its other commands do
// not load OpenSSL at start (about 1 ms of every command).
#pragma once

#include <string>
#include <string_view>

#include "src/api/http.h"

namespace trainq {

// One request to an https `endpoint`, as HttpCall describes; `host` is the Host header.
Result<HttpResponse> TlsCall(const Endpoint& endpoint, std::string_view method,
                             std::string_view target, const std::string& body,
                             const CallOptions& options, std::string_view host);

// What the module's entry, trainq_tls_call_v1, is given besides the endpoint. The module is
// built from this tree with this header; the version in the name changes with the layout.
struct TlsCallArgs {
  std::string_view method;
  std::string_view target;
  const std::string* body;
  const CallOptions* options;
  std::string_view host;
};

// TlsCall, linked or from the module; kInternal naming what was tried when the module cannot
// be loaded (an installation problem, not a daemon that does not answer; nothing was sent).
Result<HttpResponse> CallTls(const Endpoint& endpoint, std::string_view method,
                             std::string_view target, const std::string& body,
                             const CallOptions& options, std::string_view host);

}  // namespace trainq
