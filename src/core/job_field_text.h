// A JobSpec field as one text: what the Redis store keeps in the job's hash field and what the
// cluster signature covers (src/daemon/cluster_key.cc). Lists of strings are length-prefixed
// ("6:python8:train.py"), so any bytes survive; lists of numbers are comma-separated.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "src/core/container.h"
#include "src/core/job_fields.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"

namespace trainq {

std::string LengthPrefixed(std::span<const std::string> values);

// The value's text; nullopt for an unset optional (the field is then left out).
template <class T>
std::optional<std::string> FieldText(const T& value) {
  using V = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<V, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<V, bool>) {
    return value ? "1" : "0";
  } else if constexpr (std::is_integral_v<V>) {
    return std::to_string(value);
  } else if constexpr (std::is_same_v<V, std::optional<uint64_t>>) {
    return value ? std::optional(std::to_string(*value)) : std::nullopt;
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    // The shortest text that reads back as the same double.
    return value ? std::optional(fmt::format("{}", *value)) : std::nullopt;
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    return LengthPrefixed(value);
  } else if constexpr (std::is_same_v<V, std::vector<JobId>>) {
    return fmt::format("{}", fmt::join(value, ","));
  } else if constexpr (std::is_same_v<V, EnvVars>) {
    std::vector<std::string> flat;
    flat.reserve(value.size() * 2);
    for (const auto& [name, v] : value) {
      flat.push_back(name);
      flat.push_back(v);
    }
    return LengthPrefixed(flat);
  } else if constexpr (std::is_same_v<V, ContainerSpec>) {
    return ContainerToText(value);
  } else if constexpr (std::is_same_v<V, std::vector<Transfer>>) {
    return TransfersToText(value);
  } else {
    static_assert(std::is_same_v<V, StopSpec>, "a JobSpec member type with no text form");
    return StopToText(value);
  }
}

// A row's field of `spec` as text (collect's text holds collect_to too).
template <class Field>
std::optional<std::string> FieldText(const Field& field, const JobSpec& spec) {
  if (field.info.codec == FieldCodec::kCollectPair) return CollectToText(spec);
  return FieldText(Field::Of(spec));
}

}  // namespace trainq
