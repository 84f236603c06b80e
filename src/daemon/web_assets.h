// The dashboard's files (src/daemon/web, third_party/uplot), compiled into trainqd by
// cmake/EmbedFiles.cmake: the page needs no build step and nothing from the internet.
#pragma once

#include <cstddef>
#include <string_view>

namespace trainq {

struct WebAsset {
  const char* path;  // the URL path it is served at: "/", "/assets/app.js"
  const char* content_type;
  const unsigned char* data;
  size_t size;
  const char* etag;  // a quoted prefix of the file's SHA-256
};

extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// The asset served at `path`; nullptr for none.
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace trainq
