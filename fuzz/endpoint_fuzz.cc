// libFuzzer target for the server URL and listen address parsers (src/core/endpoint.h): any
// input is accepted or refused with kInvalid naming the field; what parses prints back to
// text that parses to the same endpoint; a loopback verdict never changes on that round trip.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/core/endpoint.h"

namespace trainq {
namespace {

void CheckInvalid(const Status& st, std::string_view field) {
  FUZZ_CHECK(st.code() == Code::kInvalid);
  FUZZ_CHECK(st.message().find(field) != std::string::npos);
}

void CheckUrl(std::string_view text) {
  Result<Endpoint> ep = ParseServerUrl(text, "--server");
  if (!ep.ok()) return CheckInvalid(ep.status(), "--server");
  if (ep->kind == Endpoint::Kind::kUnix) {
    FUZZ_CHECK(!ep->path.empty() && ep->path.front() == '/');
  } else {
    FUZZ_CHECK(ep->port >= 1 && ep->port <= 65535);
    FUZZ_CHECK(!ep->host.empty());
  }
  Result<Endpoint> again = ParseServerUrl(ep->Describe(), "--server");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *ep);
  FUZZ_CHECK(IsLoopbackHost(again->host) == IsLoopbackHost(ep->host));
}

void CheckListen(std::string_view text) {
  Result<ListenAddress> a = ParseListenAddress(text, "listen");
  if (!a.ok()) return CheckInvalid(a.status(), "listen");
  FUZZ_CHECK(a->port >= 0 && a->port <= 65535);
  Result<ListenAddress> again = ParseListenAddress(a->Describe(), "listen");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *a);
  // The same host served as a URL: a listen address is a URL's authority.
  if (a->port > 0) {
    Result<Endpoint> url = ParseServerUrl("https://" + a->Describe(), "--server");
    FUZZ_CHECK(url.ok() && url->host == a->host && url->port == a->port);
  }
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  trainq::CheckUrl(text);
  trainq::CheckListen(text);
  (void)trainq::IsLoopbackHost(text);
  return 0;
}
