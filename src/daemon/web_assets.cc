#include "src/daemon/web_assets.h"

namespace trainq {

const WebAsset* FindWebAsset(std::string_view path) {
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    if (path == kWebAssets[i].path) return &kWebAssets[i];
  }
  return nullptr;
}

}  // namespace trainq
