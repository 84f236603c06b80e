#include "src/cli/suggest.h"

#include <algorithm>

namespace trainq {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment over three rows: the swap looks two rows back.
  std::vector<size_t> two(b.size() + 1), one(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) one[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({one[j] + 1, cur[j - 1] + 1, one[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], two[j - 2] + 1);
      }
    }
    std::swap(two, one);
    std::swap(one, cur);
  }
  return one[b.size()];
}

std::optional<std::string> ClosestWord(std::string_view word,
                                       const std::vector<std::string>& candidates) {
  if (word.empty()) return std::nullopt;
  std::optional<std::string> prefixed;
  size_t prefix_count = 0;
  for (const std::string& c : candidates) {
    if (c.starts_with(word)) {
      prefixed = c;
      ++prefix_count;
    }
  }
  if (prefix_count == 1) return prefixed;
  if (word.size() < 2) return std::nullopt;  // one letter is near too many words
  const size_t limit = std::max<size_t>(1, (word.size() + 2) / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace trainq
