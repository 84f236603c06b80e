// Checked reading of the daemon's JSON replies. A daemon of another version (one that kept
// running across an upgrade) may send a reply without a field the CLI reads, or with another
// type; nlohmann's `[]` and `get<>` would then throw or assert. Every accessor here checks
// instead. The first problem is kept and later reads return empty values, so a command
// reads what it needs and asks status() once: kInternal (exit code 1), one line naming the
// field's path and what was expected.
//
// A Reply is a view: the JSON document it was made from must outlive it and its children.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainq/status.h"

namespace trainq {

class Reply {
 public:
  explicit Reply(const nlohmann::json& doc);

  // Required members of this object; a missing member, or one of another type, is an error.
  std::string Str(std::string_view key) const;
  int64_t Int(std::string_view key) const;
  uint64_t UInt(std::string_view key) const;
  bool Bool(std::string_view key) const;
  Reply Object(std::string_view key) const;
  std::vector<Reply> Array(std::string_view key) const;

  // Optional members: absent or null gives nullopt (or the fallback); another type is still
  // an error.
  bool Has(std::string_view key) const;  // present and not null
  std::optional<std::string> OptStr(std::string_view key) const;
  std::optional<int64_t> OptInt(std::string_view key) const;
  std::optional<uint64_t> OptUInt(std::string_view key) const;
  std::optional<double> OptNum(std::string_view key) const;
  bool BoolOr(std::string_view key, bool fallback) const;
  std::vector<Reply> ArrayOr(std::string_view key) const;  // empty when absent
  // A scalar member as text for tables: strings made TerminalSafe (src/core/words.h),
  // numbers and booleans printed, "-" when absent or null.
  std::string Text(std::string_view key) const;
  // Any member as text: strings as they are, anything else as JSON, "-" when absent.
  std::string AnyText(std::string_view key) const;

  // This value itself, for the elements of arrays of scalars.
  int64_t AsInt() const;
  std::vector<Reply> Elements() const;  // this value as an array
  std::string AsStr() const;
  // A scalar as Text() prints it.
  std::string AsText() const;

  const nlohmann::json& raw() const { return *value_; }
  bool ok() const { return state_->status.ok(); }
  const Status& status() const { return state_->status; }

 private:
  struct State {
    Status status;
  };
  Reply(const nlohmann::json* value, std::string path, std::shared_ptr<State> state);

  // The member `key`, or nullptr (absent, null, or this is not an object: then recorded).
  const nlohmann::json* Member(std::string_view key) const;
  // The member `key` if it has the type `want` checks; records an error otherwise. With
  // `required` false an absent or null member is no error.
  const nlohmann::json* Typed(std::string_view key, bool (*want)(const nlohmann::json&),
                              const char* what, bool required) const;
  std::string PathOf(std::string_view key) const;
  void Record(std::string message) const;

  const nlohmann::json* value_;  // never null: a failed read views a static null
  std::string path_;             // "jobs[2].attempts[0]"; empty for the whole reply
  std::shared_ptr<State> state_;
};

}  // namespace trainq
