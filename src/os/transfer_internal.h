// What transfer.cc and transfer_cache.cc share; not for other callers.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/os/fd.h"
#include "src/os/transfer.h"
#include "trainq/status.h"

namespace trainq::internal {

// Opens a regular file to read, never through a symbolic link; kIo naming `path` otherwise.
Result<UniqueFd> OpenRegular(const std::string& path);
// ChunkFile, refusing with kPermission a file (as opened) not owned by `owner` if given.
Result<std::vector<ChunkRef>> ChunkFileOwnedBy(const std::string& path, ChunkLimits limits,
                                               std::optional<uid_t> owner);
Status WriteAt(int fd, uint64_t offset, std::string_view data, const std::string& path);

bool IsHash(std::string_view s);  // 64 lowercase hex digits
// Chunks as [[hash, size], ...] and back: the reader's first problem, "" when none.
nlohmann::json ChunksToJson(const std::vector<ChunkRef>& chunks);
std::string ChunksFromJson(const nlohmann::json& j, std::vector<ChunkRef>& out);
// False when the sizes overflow 64 bits.
bool SumSizes(const std::vector<ChunkRef>& chunks, uint64_t& sum);
// The value at `key` of a JSON object, or null.
const nlohmann::json* Field(const nlohmann::json& object, const char* key);

}  // namespace trainq::internal
