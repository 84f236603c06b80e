#include "src/core/job_fields.h"

#include "src/core/job_field_text.h"

#include <string>

namespace trainq {

namespace {

// A member added to JobSpec makes this binding fail to compile: add its row to kJobFields
// (and a column, with a migration, in src/store/sqlite/schema.cc), then count it here.
[[maybe_unused]] void EveryMemberHasARow(JobSpec& s) {
  [[maybe_unused]] auto& [f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16,
                          f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31,
                          f32, f33, f34, f35, f36, f37, f38, f39, f40, f41, f42, f43] = s;
  static_assert(kJobFieldCount == 43, "each member of JobSpec has one row in kJobFields");
}

template <size_t I>
using Row = std::tuple_element_t<I, std::remove_cvref_t<decltype(kJobFields)>>;

// How many rows name the same member as row I.
template <size_t I, size_t... J>
constexpr size_t RowsLike(std::index_sequence<J...>) {
  return (size_t{std::is_same_v<Row<I>, Row<J>>} + ...);
}

template <size_t... I>
constexpr bool MembersDistinct(std::index_sequence<I...> all) {
  return ((RowsLike<I>(all) == 1) && ...);
}
static_assert(MembersDistinct(std::make_index_sequence<kJobFieldCount>()),
              "no member of JobSpec has two rows in kJobFields");

}  // namespace

const std::array<JobFieldInfo, kJobFieldCount>& JobFieldInfos() {
  static const std::array<JobFieldInfo, kJobFieldCount> infos = [] {
    std::array<JobFieldInfo, kJobFieldCount> out;
    size_t i = 0;
    ForEachJobField([&](const auto& field) { out[i++] = field.info; });
    return out;
  }();
  return infos;
}

std::string LengthPrefixed(std::span<const std::string> values) {
  std::string out;
  for (const std::string& v : values) {
    out += std::to_string(v.size());
    out += ':';
    out += v;
  }
  return out;
}

std::string_view RequestKeys() {
  static const std::string keys = [] {
    std::string out;
    for (const JobFieldInfo& f : JobFieldInfos()) {
      std::string_view rest = f.request;
      while (!rest.empty()) {
        size_t space = rest.find(' ');
        std::string_view key = rest.substr(0, space);
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        std::string listed = ", " + out + ", ";
        if (listed.find(", " + std::string(key) + ", ") != std::string::npos) continue;
        if (!out.empty()) out += ", ";
        out += key;
      }
    }
    return out;
  }();
  return keys;
}

}  // namespace trainq
