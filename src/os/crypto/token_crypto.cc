#include "src/os/crypto/token_crypto.h"

#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace trainq {

namespace {

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace

Result<std::string> NewToken() {
  unsigned char bytes[32] = {};
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::Io(std::string("cannot read the kernel's random source (getrandom): ") +
                        std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return "tq_" + Hex(bytes, sizeof(bytes));
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // SHA-256 is always available in libcrypto; a failure here is a broken installation.
  if (EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr) != 1) std::abort();
  return Hex(digest, len);
}

}  // namespace trainq
