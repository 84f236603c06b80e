// "Did you mean": the closest of a set of known words to one a user mistyped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainq {

// Edits (insert, delete, substitute, swap two neighbours) that turn a into b.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to word, when it is near enough to be a slip of the keyboard (at most
// a third of its letters off, or word is a prefix of exactly one candidate); ties go to the
// first candidate listed.
std::optional<std::string> ClosestWord(std::string_view word,
                                       const std::vector<std::string>& candidates);

}  // namespace trainq
