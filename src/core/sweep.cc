#include "src/core/sweep.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace trainq {

namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

std::optional<int> Number(std::string_view text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0) {
    return std::nullopt;
  }
  return n;
}

void ReplaceAll(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// Adds the indices of one comma-separated piece ("3", "0-15", "0-15:4") to `out`.
bool AddRange(std::string_view piece, std::set<int>& out) {
  std::vector<std::string_view> step_parts = Split(piece, ':');
  if (step_parts.size() > 2) return false;
  std::vector<std::string_view> ends = Split(step_parts[0], '-');
  if (ends.size() > 2) return false;
  std::optional<int> first = Number(ends[0]);
  std::optional<int> last = ends.size() == 2 ? Number(ends[1]) : first;
  std::optional<int> step = step_parts.size() == 2 ? Number(step_parts[1]) : std::optional(1);
  if (!first || !last || !step || *step < 1 || *last < *first) return false;
  if (*last > kMaxArrayIndexValue) return false;
  if (step_parts.size() == 2 && ends.size() != 2) return false;
  for (int i = *first; i <= *last; i += *step) {
    out.insert(i);
    if (out.size() > kMaxExpandedJobs) return false;
  }
  return true;
}

}  // namespace

Result<SweepAxis> ParseSweep(std::string_view text) {
  size_t eq = text.find('=');
  std::string_view name = text.substr(0, std::min(eq, text.size()));
  auto bad = [&](std::string_view why) {
    return Status::Invalid(fmt::format(
        "--sweep: {} in '{}'; use NAME=V1,V2,... (NAME of letters, digits and _), and {{NAME}} "
        "in the command, e.g. --sweep lr=1e-3,3e-4 -- python train.py --lr {{lr}}",
        why, text.substr(0, 200)));
  };
  if (eq == std::string_view::npos) return bad("no '='");
  if (name.empty() || !std::all_of(name.begin(), name.end(), NameChar)) return bad("a bad name");
  if (name == "index") return bad("'index' is the array index's name");
  SweepAxis axis{std::string(name), {}};
  for (std::string_view v : Split(text.substr(eq + 1), ',')) {
    if (v.empty()) return bad("an empty value");
    axis.values.emplace_back(v);
  }
  return axis;
}

Result<ArraySpec> ParseArray(std::string_view text, std::string_view field) {
  auto bad = [&]() {
    return Status::Invalid(fmt::format(
        "{}: '{}' is not an array; use indices and ranges as sbatch takes them: 0-15, 1,3,5, "
        "0-15:2 (a step), then %N for at most N running at once, e.g. 0-15%4 (indices 0 to {}, "
        "at most {} jobs)",
        field, text.substr(0, 200), kMaxArrayIndexValue, kMaxExpandedJobs));
  };
  ArraySpec spec;
  size_t percent = text.find('%');
  if (percent != std::string_view::npos) {
    std::optional<int> limit = Number(text.substr(percent + 1));
    if (!limit || *limit < 1) return bad();
    spec.limit = *limit;
    text = text.substr(0, percent);
  }
  std::set<int> indices;
  for (std::string_view piece : Split(text, ',')) {
    if (!AddRange(piece, indices)) return bad();
  }
  spec.indices.assign(indices.begin(), indices.end());
  return spec;
}

Result<std::vector<ExpandedJob>> ExpandJobs(const std::vector<std::string>& command,
                                            const std::vector<SweepAxis>& axes,
                                            const ArraySpec* array) {
  size_t total = array ? std::max<size_t>(array->indices.size(), 1) : 1;
  std::set<std::string> names;
  for (const SweepAxis& axis : axes) {
    if (!names.insert(axis.name).second) {
      return Status::Invalid(
          fmt::format("--sweep: {} is given twice; give all its values in one "
                      "--sweep {}=V1,V2,...",
                      axis.name, axis.name));
    }
    std::string mark = "{" + axis.name + "}";
    bool used = std::any_of(command.begin(), command.end(), [&](const std::string& a) {
      return a.find(mark) != std::string::npos;
    });
    if (!used) {
      return Status::Invalid(
          fmt::format("--sweep {}: {} appears nowhere in the command, so every "
                      "job would run the same command; put {} where the value "
                      "goes",
                      axis.name, mark, mark));
    }
    total *= axis.values.size();
    if (total > kMaxExpandedJobs) {
      return Status::Invalid(fmt::format("--sweep: the product is over {} jobs", kMaxExpandedJobs));
    }
  }
  std::vector<ExpandedJob> out;
  std::vector<size_t> at(axes.size(), 0);  // an odometer over the axes, last axis fastest
  std::vector<int> indices = array ? array->indices : std::vector<int>{-1};
  for (;;) {
    for (int index : indices) {
      ExpandedJob job{command, "", index};
      for (size_t k = 0; k < axes.size(); ++k) {
        const std::string& value = axes[k].values[at[k]];
        for (std::string& arg : job.command) ReplaceAll(arg, "{" + axes[k].name + "}", value);
        job.label += fmt::format("{}{}={}", job.label.empty() ? "" : " ", axes[k].name, value);
      }
      if (index >= 0) {
        for (std::string& arg : job.command) ReplaceAll(arg, "{index}", std::to_string(index));
        job.label += fmt::format("{}[{}]", job.label.empty() ? "" : " ", index);
      }
      out.push_back(std::move(job));
    }
    size_t k = axes.size();
    while (k > 0 && ++at[k - 1] == axes[k - 1].values.size()) at[--k] = 0;
    if (k == 0) return out;
  }
}

}  // namespace trainq
