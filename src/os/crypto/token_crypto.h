// Random bytes and SHA-256, each written once: API tokens are made from the kernel's random
// source and stored only as a SHA-256 digest (docs/operations.md, "Tokens"); snapshots are
// named by digests. Its own library (trainq_crypto, below src/os); OpenSSL's headers stay in
// the source file.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

// "tq_" and 64 hex digits: 256 bits from getrandom(2). kIo when the kernel cannot give them
// (a token is never made from less).
Result<std::string> NewToken();

// SHA-256 of `text` as 64 lowercase hex digits: what the store keeps of a token.
std::string Sha256Hex(std::string_view text);

// SHA-256 fed piece by piece (a file read in blocks). Not thread-safe; one digest per object.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Add(std::string_view data);
  // The digest of everything added, as 64 lowercase hex digits. Call it once, last.
  std::string HexDigest();

 private:
  struct Context;  // OpenSSL's, kept out of this header
  std::unique_ptr<Context> context_;
};

// `bytes` random bytes from getrandom(2) as 2*bytes lowercase hex digits; kIo when the kernel
// cannot give them.
Result<std::string> RandomHex(size_t bytes);

// HMAC-SHA256 of `text` under `key`, as 64 lowercase hex digits (a cluster key's signatures).
std::string HmacSha256Hex(std::string_view key, std::string_view text);

// Whether two digests are equal, in time that depends only on their length: a signature
// check must not tell an attacker how many of its leading digits were right.
bool SameDigest(std::string_view a, std::string_view b);

}  // namespace trainq
