#include "src/cli/reply.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/words.h"

namespace trainq {

using json = nlohmann::json;

namespace {

const json& Null() {
  static const json kNull;
  return kNull;
}

constexpr const char* kVersionHint = "is trainqd the same version as trainq?";

// "a string", "an array", as the messages name what they found.
std::string Described(const json& j) {
  std::string name = j.type_name();
  bool vowel = name[0] == 'a' || name[0] == 'o';
  return (vowel ? "an " : "a ") + name;
}

bool IsString(const json& j) { return j.is_string(); }
bool IsInteger(const json& j) { return j.is_number_integer(); }
bool IsUnsigned(const json& j) { return j.is_number_unsigned(); }
bool IsNumber(const json& j) { return j.is_number(); }
bool IsBool(const json& j) { return j.is_boolean(); }
bool IsObject(const json& j) { return j.is_object(); }
bool IsArray(const json& j) { return j.is_array(); }

}  // namespace

Reply::Reply(const json& doc) : Reply(&doc, "", std::make_shared<State>()) {}

Reply::Reply(const json* value, std::string path, std::shared_ptr<State> state)
    : value_(value), path_(std::move(path)), state_(std::move(state)) {}

std::string Reply::PathOf(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void Reply::Record(std::string message) const {
  if (state_->status.ok()) state_->status = Status::Internal(std::move(message));
}

const json* Reply::Member(std::string_view key) const {
  if (!value_->is_object()) {
    Record(path_.empty() ? fmt::format("the daemon's reply is {}, not an object; {}",
                                       Described(*value_), kVersionHint)
                         : fmt::format("the daemon's reply has field '{}' as {}, not an object; {}",
                                       path_, Described(*value_), kVersionHint));
    return nullptr;
  }
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return nullptr;
  return &*it;
}

const json* Reply::Typed(std::string_view key, bool (*want)(const json&), const char* what,
                         bool required) const {
  const json* m = Member(key);
  if (m == nullptr) {
    if (required && value_->is_object()) {
      Record(fmt::format("the daemon's reply lacks field '{}' ({}); {}", PathOf(key), what,
                         kVersionHint));
    }
    return nullptr;
  }
  if (!want(*m)) {
    Record(fmt::format("the daemon's reply has field '{}' as {} where {} was expected; {}",
                       PathOf(key), Described(*m), what, kVersionHint));
    return nullptr;
  }
  return m;
}

std::string Reply::Str(std::string_view key) const {
  const json* m = Typed(key, IsString, "a string", true);
  return m ? m->get<std::string>() : std::string();
}

int64_t Reply::Int(std::string_view key) const {
  const json* m = Typed(key, IsInteger, "an integer", true);
  return m ? m->get<int64_t>() : 0;
}

uint64_t Reply::UInt(std::string_view key) const {
  const json* m = Typed(key, IsUnsigned, "a non-negative integer", true);
  return m ? m->get<uint64_t>() : 0;
}

bool Reply::Bool(std::string_view key) const {
  const json* m = Typed(key, IsBool, "true or false", true);
  return m ? m->get<bool>() : false;
}

Reply Reply::Object(std::string_view key) const {
  const json* m = Typed(key, IsObject, "an object", true);
  return Reply(m ? m : &Null(), PathOf(key), state_);
}

std::vector<Reply> Reply::Array(std::string_view key) const {
  const json* m = Typed(key, IsArray, "an array", true);
  if (m == nullptr) return {};
  return Reply(m, PathOf(key), state_).Elements();
}

std::vector<Reply> Reply::Elements() const {
  std::vector<Reply> out;
  if (!value_->is_array()) {
    Record(fmt::format("the daemon's reply has '{}' as {} where an array was expected; {}", path_,
                       Described(*value_), kVersionHint));
    return out;
  }
  for (size_t i = 0; i < value_->size(); ++i) {
    out.push_back(Reply(&(*value_)[i], fmt::format("{}[{}]", path_, i), state_));
  }
  return out;
}

std::vector<Reply> Reply::ArrayOr(std::string_view key) const {
  if (!Has(key)) return {};
  return Array(key);
}

bool Reply::Has(std::string_view key) const {
  if (!value_->is_object()) return false;
  auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

std::optional<std::string> Reply::OptStr(std::string_view key) const {
  const json* m = Typed(key, IsString, "a string", false);
  if (m == nullptr) return std::nullopt;
  return m->get<std::string>();
}

std::optional<int64_t> Reply::OptInt(std::string_view key) const {
  const json* m = Typed(key, IsInteger, "an integer", false);
  if (m == nullptr) return std::nullopt;
  return m->get<int64_t>();
}

std::optional<uint64_t> Reply::OptUInt(std::string_view key) const {
  const json* m = Typed(key, IsUnsigned, "a non-negative integer", false);
  if (m == nullptr) return std::nullopt;
  return m->get<uint64_t>();
}

std::optional<double> Reply::OptNum(std::string_view key) const {
  const json* m = Typed(key, IsNumber, "a number", false);
  if (m == nullptr) return std::nullopt;
  return m->get<double>();
}

bool Reply::BoolOr(std::string_view key, bool fallback) const {
  const json* m = Typed(key, IsBool, "true or false", false);
  return m ? m->get<bool>() : fallback;
}

std::string Reply::Text(std::string_view key) const {
  const json* m = Member(key);
  if (m == nullptr) return "-";
  return Reply(m, PathOf(key), state_).AsText();
}

std::string Reply::AnyText(std::string_view key) const {
  const json* m = Member(key);
  if (m == nullptr) return "-";
  return m->is_string() ? m->get<std::string>() : m->dump();
}

int64_t Reply::AsInt() const {
  if (value_->is_number_integer()) return value_->get<int64_t>();
  Record(fmt::format("the daemon's reply has '{}' as {} where an integer was expected; {}", path_,
                     Described(*value_), kVersionHint));
  return 0;
}

std::string Reply::AsStr() const {
  if (value_->is_string()) return value_->get<std::string>();
  Record(fmt::format("the daemon's reply has '{}' as {} where a string was expected; {}", path_,
                     Described(*value_), kVersionHint));
  return "";
}

std::string Reply::AsText() const {
  if (value_->is_null()) return "-";
  if (value_->is_string()) return TerminalSafe(value_->get<std::string>());
  if (value_->is_number() || value_->is_boolean()) return value_->dump();
  Record(fmt::format("the daemon's reply has '{}' as {} where a single value was expected; {}",
                     path_, Described(*value_), kVersionHint));
  return "-";
}

}  // namespace trainq
