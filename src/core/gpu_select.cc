#include "src/core/gpu_select.h"

#include <algorithm>

#include <fmt/format.h>

namespace trainq {

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

bool IsSeparator(char c) { return c == ' ' || c == '-'; }

// Calls `f` on each word of `text` (split at spaces and '-'); stops when it returns true.
template <typename F>
bool AnyWord(std::string_view text, F f) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSeparator(text[i])) ++i;
    size_t end = i;
    while (end < text.size() && !IsSeparator(text[end])) ++end;
    if (end > i && f(text.substr(i, end - i))) return true;
    i = end;
  }
  return false;
}

bool HasWord(std::string_view text, std::string_view word) {
  return AnyWord(text, [word](std::string_view w) { return SameIgnoringCase(w, word); });
}

bool FeatureChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool HasFeature(const std::vector<std::string>& features, std::string_view name) {
  return std::any_of(features.begin(), features.end(),
                     [name](const std::string& f) { return SameIgnoringCase(f, name); });
}

// A clause "a|b" holds where the node has any of its names.
bool ClauseHolds(const std::vector<std::string>& features, std::string_view clause) {
  size_t start = 0;
  while (true) {
    size_t bar = clause.find('|', start);
    if (HasFeature(features, clause.substr(start, bar - start))) return true;
    if (bar == std::string_view::npos) return false;
    start = bar + 1;
  }
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace

bool GpuTypeMatches(std::string_view type, std::string_view model, std::string_view label) {
  if (type.empty()) return true;
  bool any = false;
  bool all = !AnyWord(type, [&](std::string_view word) {
    any = true;
    return !HasWord(model, word) && !HasWord(label, word);
  });
  return any && all;
}

std::string GpuTypeShown(std::string_view type) {
  std::string out(type);
  for (char& c : out) c = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
  return out;
}

Status CheckGpuType(std::string_view type, std::string_view field) {
  bool ok =
      !type.empty() && type.size() <= kMaxGpuTypeBytes &&
      std::all_of(type.begin(), type.end(), [](char c) { return FeatureChar(c) || c == ' '; });
  bool has_word = AnyWord(type, [](std::string_view) { return true; });
  if (ok && has_word) return Status::Ok();
  return Status::Invalid(fmt::format("{}: '{}' is not {}", field, type, kGpuTypeForm));
}

bool ValidFeature(std::string_view name) {
  return !name.empty() && name.size() <= kMaxFeatureBytes &&
         std::all_of(name.begin(), name.end(), FeatureChar);
}

Result<std::vector<std::string>> ParseConstraint(std::string_view text, std::string_view field) {
  auto refuse = [&](std::string_view why) -> Status {
    return Status::Invalid(
        fmt::format("{}: '{}' {}; the accepted form: {}", field, text, why, kConstraintForm));
  };
  if (text.find_first_of("[]()") != std::string_view::npos) {
    return refuse("uses brackets, which trainq does not read (repeat --constraint instead)");
  }
  if (text.find('*') != std::string_view::npos) {
    return refuse("counts nodes per feature (*N), which trainq does not do");
  }
  bool ands = text.find('&') != std::string_view::npos;
  bool ors = text.find('|') != std::string_view::npos;
  if (ands && ors) {
    return refuse(
        "mixes & and |; give the alternatives as one --constraint each, e.g. "
        "--constraint ib --constraint 'a100|h100'");
  }
  std::vector<std::string_view> names = Split(text, ors ? '|' : '&');
  if (names.size() > kMaxConstraints) {
    return refuse(fmt::format("has more than {} features", kMaxConstraints));
  }
  for (std::string_view name : names) {
    if (!ValidFeature(name)) {
      return refuse(name.empty() ? "has an empty feature"
                                 : fmt::format("has '{}', not a feature name", name));
    }
  }
  std::vector<std::string> clauses;
  if (ors) {
    clauses.emplace_back(text);
  } else {
    for (std::string_view name : names) clauses.emplace_back(name);
  }
  return clauses;
}

void GpuCensus::Add(std::string_view model, std::string_view label) {
  std::string name = model.empty() ? "of unknown model" : std::string(model);
  if (!label.empty()) name += fmt::format(" (label {})", label);
  auto it =
      std::find_if(models_.begin(), models_.end(), [&](const auto& m) { return m.first == name; });
  if (it == models_.end()) {
    models_.emplace_back(std::move(name), 1);
  } else {
    ++it->second;
  }
}

std::string GpuCensus::Text(size_t max_listed) const {
  if (models_.empty()) return "none";
  std::vector<std::string> items;
  for (size_t i = 0; i < models_.size() && i < max_listed; ++i) {
    items.push_back(fmt::format("{} {}", models_[i].second, models_[i].first));
  }
  if (models_.size() > items.size()) {
    items.push_back(fmt::format("{} more", models_.size() - items.size()));
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

bool MeetsConstraints(const std::vector<std::string>& features,
                      const std::vector<std::string>& constraints) {
  return std::all_of(constraints.begin(), constraints.end(),
                     [&](const std::string& c) { return ClauseHolds(features, c); });
}

std::vector<std::string> UnmetConstraints(const std::vector<std::string>& features,
                                          const std::vector<std::string>& constraints) {
  std::vector<std::string> out;
  for (const std::string& c : constraints) {
    if (!ClauseHolds(features, c)) out.push_back(c);
  }
  return out;
}

}  // namespace trainq
