#include "src/os/crypto/token_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

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

Result<std::string> RandomHex(size_t size) {
  std::string bytes(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(bytes.data() + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::Io(std::string("cannot read the kernel's random source (getrandom): ") +
                        std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return Hex(reinterpret_cast<const unsigned char*>(bytes.data()), size);
}

Result<std::string> NewToken() {
  Result<std::string> hex = RandomHex(32);
  if (!hex.ok()) return hex.status();
  return "tq_" + *hex;
}

struct Sha256::Context {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  // SHA-256 is always available in libcrypto; a failure here is a broken installation.
  if (!context_->md || EVP_DigestInit_ex(context_->md.get(), EVP_sha256(), nullptr) != 1) {
    std::abort();
  }
}

Sha256::~Sha256() = default;

void Sha256::Add(std::string_view data) {
  if (EVP_DigestUpdate(context_->md.get(), data.data(), data.size()) != 1) std::abort();
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(context_->md.get(), digest, &len) != 1) std::abort();
  return Hex(digest, len);
}

std::string Sha256Hex(std::string_view text) {
  Sha256 hash;
  hash.Add(text);
  return hash.HexDigest();
}

std::string HmacSha256Hex(std::string_view key, std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest,
           &len) == nullptr) {
    std::abort();  // as above: HMAC-SHA256 cannot fail in a working libcrypto
  }
  return Hex(digest, len);
}

bool SameDigest(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace trainq
