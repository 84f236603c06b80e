// A fast writer for the JSON text of the store's array columns. Submit encodes the whole
// environment of every job it stores, and building nlohmann::json values for that cost
// more than the database work; reading stays with nlohmann::json.
#pragma once

#include <string>
#include <string_view>

namespace trainq::sqlite {

// Appends `text` as a JSON string literal (quotes included) to `out`. Returns false,
// leaving `out` with a partial literal, if `text` is not well-formed UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included): JSON text cannot carry it.
bool AppendJsonString(std::string& out, std::string_view text);

}  // namespace trainq::sqlite
