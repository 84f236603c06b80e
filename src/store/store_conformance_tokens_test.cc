// The Store conformance tests (see store_conformance.h): API tokens, kept as digests.
#include <gmock/gmock.h>

#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

// A digest-shaped hash made from a seed: the store never sees a token.
std::string HashOf(char seed) { return std::string(64, seed); }

TokenRecord Token(std::string name, char seed, Role role = Role::kSubmit) {
  TokenRecord t;
  t.name = std::move(name);
  t.hash = HashOf(seed);
  t.role = role;
  t.user = "ada";
  t.created_at = 1'790'000'000'000;
  t.expires_at = t.created_at + 86'400'000;
  t.created_by = "root";
  return t;
}

TEST_P(StoreConformance, TokensAreKeptAndFoundByTheirHash) {
  ASSERT_TRUE(IsOk(store().AddToken(Token("laptop", 'a', Role::kRead))));
  ASSERT_TRUE(IsOk(store().AddToken(Token("ci", 'b', Role::kAdmin))));
  Result<std::optional<TokenRecord>> found = store().FindTokenByHash(HashOf('b'));
  ASSERT_TRUE(IsOk(found));
  ASSERT_TRUE(found->has_value());
  const TokenRecord& t = **found;
  EXPECT_EQ(t.name, "ci");
  EXPECT_EQ(t.hash, HashOf('b'));
  EXPECT_EQ(t.role, Role::kAdmin);
  EXPECT_EQ(t.user, "ada");
  EXPECT_EQ(t.created_at, 1'790'000'000'000);
  EXPECT_EQ(t.expires_at, 1'790'000'000'000 + 86'400'000);
  EXPECT_EQ(t.revoked_at, 0);
  EXPECT_EQ(t.created_by, "root");

  Result<std::optional<TokenRecord>> none = store().FindTokenByHash(HashOf('c'));
  ASSERT_TRUE(IsOk(none));
  EXPECT_FALSE(none->has_value());

  Result<std::vector<TokenRecord>> all = store().ListTokens();
  ASSERT_TRUE(IsOk(all));
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "laptop");
  EXPECT_EQ((*all)[0].role, Role::kRead);
  EXPECT_EQ((*all)[1].name, "ci");
}

TEST_P(StoreConformance, ALiveTokenNameIsUnique) {
  ASSERT_TRUE(IsOk(store().AddToken(Token("laptop", 'a'))));
  Status st = store().AddToken(Token("laptop", 'b'));
  EXPECT_TRUE(HasCode(st, Code::kConflict));
  EXPECT_THAT(st.message(), HasSubstr("laptop"));
  Result<std::optional<TokenRecord>> second = store().FindTokenByHash(HashOf('b'));
  ASSERT_TRUE(IsOk(second));
  EXPECT_FALSE(second->has_value());  // nothing stored
}

TEST_P(StoreConformance, RevokedTokensAreKeptAndTheirNameFreed) {
  ASSERT_TRUE(IsOk(store().AddToken(Token("laptop", 'a'))));
  ASSERT_TRUE(IsOk(store().RevokeToken("laptop", kT0)));
  Result<std::optional<TokenRecord>> old = store().FindTokenByHash(HashOf('a'));
  ASSERT_TRUE(IsOk(old));
  ASSERT_TRUE(old->has_value());
  EXPECT_EQ((*old)->revoked_at, kT0);

  Status again = store().RevokeToken("laptop", kT0 + 1);
  EXPECT_TRUE(HasCode(again, Code::kNotFound));
  EXPECT_THAT(again.message(), HasSubstr("'laptop'"));
  EXPECT_TRUE(HasCode(store().RevokeToken("nosuch", kT0), Code::kNotFound));

  ASSERT_TRUE(IsOk(store().AddToken(Token("laptop", 'b'))));  // rotated under the same name
  Result<std::vector<TokenRecord>> all = store().ListTokens();
  ASSERT_TRUE(IsOk(all));
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].revoked_at, kT0);
  EXPECT_EQ((*all)[1].revoked_at, 0);
}

TEST_P(StoreConformance, TokensOfABadNameOrHashAreRefused) {
  Status st = store().AddToken(Token("a b", 'a'));
  EXPECT_TRUE(HasCode(st, Code::kInvalid));
  EXPECT_THAT(st.message(), HasSubstr("name:"));
  TokenRecord clear = Token("laptop", 'a');
  clear.hash = "tq_0123";  // a token in clear, not a digest
  st = store().AddToken(clear);
  EXPECT_TRUE(HasCode(st, Code::kInvalid));
  EXPECT_THAT(st.message(), HasSubstr("hash:"));
  Result<std::vector<TokenRecord>> all = store().ListTokens();
  ASSERT_TRUE(IsOk(all));
  EXPECT_TRUE(all->empty());
}

}  // namespace
}  // namespace trainq
