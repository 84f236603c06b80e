// Memory sizes as users write them: 20GiB, 20G, 512MiB, 1.5TiB, 20GB (SI), a bare number
// (MiB, as Slurm does), and for --mem also a percentage of the GPU's total (40%).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

// Binary suffixes K/KiB/M/MiB/G/GiB/T/TiB (the single letters are binary, as in Slurm and
// nvidia-smi), SI suffixes KB/MB/GB/TB, B for bytes; case-insensitive; decimals allowed;
// a bare number is MiB. Zero, negative, overflowing or unknown forms are kInvalid with a
// message that lists the accepted forms. `field` names the input in that message. With
// `zero_ok`, zero ("0", "0GiB") is a size too (memory others hold, for instance).
Result<uint64_t> ParseSize(std::string_view text, std::string_view field = "size",
                           bool zero_ok = false);

// A GPU memory request: bytes, or a percentage (0 < p <= 100) of each GPU's total.
struct MemRequest {
  std::optional<uint64_t> bytes;
  std::optional<double> percent;
};
Result<MemRequest> ParseMemRequest(std::string_view text, std::string_view field = "--mem");

// "20.0 GiB", "512.0 MiB", "1.5 TiB", "300 B": binary units, one decimal.
std::string FormatBytes(uint64_t bytes);

}  // namespace trainq
