// libFuzzer target for what an unauthenticated client controls: the Authorization header
// (ParseBearer) and a token's name (CheckTokenName). Invariants: a parsed token is a
// non-empty b64token ending the header and parses again the same; a refusal is
// kUnauthenticated with one of a few fixed messages (it quotes nothing); a name is accepted exactly
// when it has the documented form, and a refusal names the field `name`.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/core/auth.h"

namespace trainq {
namespace {

bool B64Char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '+' || ch == '/' || ch == '=';
}

void CheckBearer(std::string_view header) {
  Result<std::string> got = ParseBearer(header);
  if (got.ok()) {
    const std::string& token = *got;
    FUZZ_CHECK(!token.empty());
    FUZZ_CHECK(token.front() != '=');
    for (char ch : token) FUZZ_CHECK(B64Char(ch));
    FUZZ_CHECK(header.size() > token.size());
    FUZZ_CHECK(header.substr(header.size() - token.size()) == token);
    Result<std::string> again = ParseBearer("Bearer " + token);
    FUZZ_CHECK(again.ok() && *again == token);
    return;
  }
  FUZZ_CHECK(got.status().code() == Code::kUnauthenticated);
  // The header may hold a secret: a refusal is one of the fixed messages, so it can quote
  // nothing of it.
  static const std::string kFixed[] = {ParseBearer("Basic x").status().message(),
                                       ParseBearer("Bearer ").status().message(),
                                       ParseBearer("Bearer !").status().message()};
  const std::string& message = got.status().message();
  FUZZ_CHECK(message == kFixed[0] || message == kFixed[1] || message == kFixed[2]);
}

void CheckName(std::string_view name) {
  bool form = !name.empty() && name.size() <= 64;
  for (char ch : name) {
    bool allowed = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    form = form && allowed;
  }
  Status st = CheckTokenName(name);
  FUZZ_CHECK(st.ok() == form);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == Code::kInvalid);
    FUZZ_CHECK(st.message().rfind("name: ", 0) == 0);
  }
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  trainq::CheckBearer(text);
  trainq::CheckName(text);
  return 0;
}
