// Splitting a command line into argv the way sh does for quoting — single quotes, double
// quotes, backslashes — with no expansion of any kind ($VAR, globs, ~ stay as written).
// Used for `trainq submit --from FILE`, one command per line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

// kInvalid for an unterminated quote or a trailing backslash, naming `field`.
Result<std::vector<std::string>> SplitWords(std::string_view line, std::string_view field);

}  // namespace trainq
