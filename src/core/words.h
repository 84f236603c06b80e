// Words and text for the command line: splitting a line into argv the way sh does for
// quoting — single quotes, double quotes, backslashes — with no expansion of any kind ($VAR,
// globs, ~ stay as written), used for `trainq submit --from FILE`; and text made safe to print.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

// Text from jobs (names, arguments, reasons) made safe to print on a terminal: control
// characters (C0, DEL, and C1 as UTF-8) are written as \n, \t, \r or \xHH / \u00HH, so
// output cannot move the cursor, retitle the window or hide text.
// Everything else, UTF-8 included, is unchanged.
std::string TerminalSafe(std::string_view text);

// Where `text` stops being UTF-8: "byte 0xff at offset 3 is not UTF-8", or nullopt when it
// is all UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). The API carries
// text as JSON strings; bytes that are not UTF-8 are refused rather than replaced.
std::optional<std::string> Utf8Problem(std::string_view text);

// kInvalid for an unterminated quote or a trailing backslash, naming `field`.
Result<std::vector<std::string>> SplitWords(std::string_view line, std::string_view field);

}  // namespace trainq
