#include "src/os/crypto/token_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#ifdef TRAINQ_LIBCRYPTO_AT_RUN_TIME
#include <dlfcn.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstdio>
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

// The libcrypto functions used here. The daemon links libcrypto; the client loads it only when
// it hashes (a `--snapshot` submit): every other command would pay ~1 ms to load it
// (docs/benchmarks.md, "Start-up").
struct Crypto {
  EVP_MD_CTX* (*md_ctx_new)();
  void (*md_ctx_free)(EVP_MD_CTX*);
  const EVP_MD* (*sha256)();
  int (*digest_init)(EVP_MD_CTX*, const EVP_MD*, ENGINE*);
  int (*digest_update)(EVP_MD_CTX*, const void*, size_t);
  int (*digest_final)(EVP_MD_CTX*, unsigned char*, unsigned int*);
  unsigned char* (*hmac)(const EVP_MD*, const void*, int, const unsigned char*, size_t,
                         unsigned char*, unsigned int*);
  int (*memcmp)(const void*, const void*, size_t);  // in time that depends only on the size
};

#ifdef TRAINQ_LIBCRYPTO_AT_RUN_TIME
template <class F>
void Bind(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (out == nullptr) {
    std::fprintf(stderr, "trainq: libcrypto.so.3 lacks %s; reinstall libssl3\n", name);
    std::abort();
  }
}

Crypto Load() {
  // Debian's libssl3 package; trainq cannot hash or check tokens without it.
  void* lib = ::dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "trainq: cannot load libcrypto.so.3 (%s); install libssl3\n", ::dlerror());
    std::abort();
  }
  Crypto c{};
  Bind(lib, "EVP_MD_CTX_new", c.md_ctx_new);
  Bind(lib, "EVP_MD_CTX_free", c.md_ctx_free);
  Bind(lib, "EVP_sha256", c.sha256);
  Bind(lib, "EVP_DigestInit_ex", c.digest_init);
  Bind(lib, "EVP_DigestUpdate", c.digest_update);
  Bind(lib, "EVP_DigestFinal_ex", c.digest_final);
  Bind(lib, "HMAC", c.hmac);
  Bind(lib, "CRYPTO_memcmp", c.memcmp);
  return c;
}
#else
Crypto Load() {
  return Crypto{EVP_MD_CTX_new,   EVP_MD_CTX_free,    EVP_sha256, EVP_DigestInit_ex,
                EVP_DigestUpdate, EVP_DigestFinal_ex, HMAC,       CRYPTO_memcmp};
}
#endif

const Crypto& Lib() {
  static const Crypto crypto = Load();
  return crypto;
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
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md{Lib().md_ctx_new(), Lib().md_ctx_free};
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  // SHA-256 is always available in libcrypto; a failure here is a broken installation.
  if (!context_->md || Lib().digest_init(context_->md.get(), Lib().sha256(), nullptr) != 1) {
    std::abort();
  }
}

Sha256::~Sha256() = default;

void Sha256::Add(std::string_view data) {
  if (Lib().digest_update(context_->md.get(), data.data(), data.size()) != 1) std::abort();
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (Lib().digest_final(context_->md.get(), digest, &len) != 1) std::abort();
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
  if (Lib().hmac(Lib().sha256(), key.data(), static_cast<int>(key.size()),
                 reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest,
                 &len) == nullptr) {
    std::abort();  // as above: HMAC-SHA256 cannot fail in a working libcrypto
  }
  return Hex(digest, len);
}

bool SameDigest(std::string_view a, std::string_view b) {
  return a.size() == b.size() && Lib().memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace trainq
