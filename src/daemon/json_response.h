// An API answer with a JSON body, for the route files (which include nlohmann/json anyway).
#pragma once

#include <nlohmann/json.hpp>

#include "src/api/http.h"
#include "src/core/json_codec.h"

namespace trainq {

inline HttpResponse Json(int status, const nlohmann::json& body) {
  return {status, DumpJson(body), "application/json"};
}

}  // namespace trainq
