#include "src/os/crypto/token_crypto.h"

#include <gtest/gtest.h>

namespace trainq {
namespace {

TEST(TokenCryptoTest, TokensAre256RandomBitsInHex) {
  Result<std::string> a = NewToken();
  Result<std::string> b = NewToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 3u + 64u);
  EXPECT_EQ(a->rfind("tq_", 0), 0u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef", 3), std::string::npos) << *a;
  EXPECT_NE(*a, *b);
}

TEST(TokenCryptoTest, Sha256MatchesKnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenCryptoTest, Sha256FedInPiecesIsTheDigestOfTheWhole) {
  Sha256 hash;
  hash.Add("a");
  hash.Add("");
  hash.Add("bc");
  EXPECT_EQ(hash.HexDigest(), Sha256Hex("abc"));
}

TEST(TokenCryptoTest, HmacMatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_NE(HmacSha256Hex("Jeff", "what do ya want for nothing?"),
            HmacSha256Hex("Jefe", "what do ya want for nothing?"));
}

TEST(TokenCryptoTest, SameDigestComparesWholeStrings) {
  EXPECT_TRUE(SameDigest("abcd", "abcd"));
  EXPECT_FALSE(SameDigest("abcd", "abce"));
  EXPECT_FALSE(SameDigest("abcd", "abc"));
  EXPECT_FALSE(SameDigest("", "a"));
}

TEST(TokenCryptoTest, RandomHexHasTheAskedLength) {
  Result<std::string> a = RandomHex(16);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace trainq
