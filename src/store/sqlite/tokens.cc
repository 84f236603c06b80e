// The tokens table of the SQLite store (schema version 5): only SHA-256 digests of tokens.
#include <fmt/format.h>

#include "src/store/sqlite/sqlite_store.h"

namespace trainq {

using sqlite::FullSyncScope;
using sqlite::Query;
using sqlite::Transaction;

namespace {

constexpr char kTokenColumns[] =
    "SELECT name, hash, role, user, created_at, expires_at, revoked_at, created_by FROM tokens ";

Result<TokenRecord> ReadToken(const Query& row) {
  TokenRecord t;
  t.name = row.Text(0);
  t.hash = row.Text(1);
  std::optional<Role> role = ParseRole(row.Text(2));
  if (!role) return Status::Internal(fmt::format("token '{}' has no known role", t.name));
  t.role = *role;
  t.user = row.Text(3);
  t.created_at = row.Int64(4);
  t.expires_at = row.Int64(5);
  t.revoked_at = row.Int64(6);
  t.created_by = row.Text(7);
  return t;
}

Result<std::vector<TokenRecord>> ReadTokens(Query& select) {
  std::vector<TokenRecord> tokens;
  for (;;) {
    Result<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return tokens;
    Result<TokenRecord> t = ReadToken(select);
    if (!t.ok()) return t.status();
    tokens.push_back(std::move(*t));
  }
}

}  // namespace

// Synced like a submit: a token someone was shown must work after a power cut, and a
// revoked one must stay revoked.
Status SqliteStore::AddToken(const TokenRecord& token) {
  TRAINQ_RETURN_IF_ERROR(CheckTokenName(token.name));
  if (!IsTokenDigest(token.hash)) {
    return Status::Invalid("hash: expected a SHA-256 digest, 64 lowercase hex digits");
  }
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  Result<Query> live = db_.Prepare("SELECT 1 FROM tokens WHERE name = ?1 AND revoked_at = 0");
  if (!live.ok()) return live.status();
  Result<bool> exists = live->BindAll(token.name).Step();
  if (!exists.ok()) return exists.status();
  if (*exists) {
    return Status::Conflict(fmt::format(
        "a token named '{}' exists; revoke it first ('trainq token revoke {}') or choose another "
        "name",
        token.name, token.name));
  }
  Result<int64_t> inserted = db_.Run(
      "INSERT INTO tokens (name, hash, role, user, created_at, expires_at, revoked_at, "
      "created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      token.name, token.hash, RoleName(token.role), token.user, token.created_at, token.expires_at,
      token.revoked_at, token.created_by);
  if (!inserted.ok()) return inserted.status();
  return txn->Commit();
}

Result<std::vector<TokenRecord>> SqliteStore::ListTokens() {
  Result<Query> select = db_.Prepare(fmt::format("{}ORDER BY created_at, rowid", kTokenColumns));
  if (!select.ok()) return select.status();
  return ReadTokens(*select);
}

Status SqliteStore::RevokeToken(const std::string& name, UnixMs now) {
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  Result<int64_t> changed =
      db_.Run("UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at = 0", name, now);
  if (!changed.ok()) return changed.status();
  if (*changed == 0) {
    return Status::NotFound(fmt::format(
        "no token named '{}' (or it is already revoked); 'trainq token ls' lists them", name));
  }
  return txn->Commit();
}

Result<std::optional<TokenRecord>> SqliteStore::FindTokenByHash(const std::string& hash) {
  Result<Query> select = db_.Prepare(fmt::format("{}WHERE hash = ?1", kTokenColumns));
  if (!select.ok()) return select.status();
  Result<std::vector<TokenRecord>> found = ReadTokens(select->BindAll(hash));
  if (!found.ok()) return found.status();
  if (found->empty()) return std::optional<TokenRecord>();
  return std::optional<TokenRecord>(std::move(found->front()));
}

}  // namespace trainq
