// What --stage accepts and how a job's transfers are kept (docs/cluster.md, "Code and data").
// Pure: the client makes the manifests (src/os/transfer.h), the daemon checks them at submit
// and the nodes fetch what they name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/core/spec.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

inline constexpr size_t kMaxStages = 64;
inline constexpr size_t kMaxTransfers = kMaxStages + 65;  // and a tree, and its links
inline constexpr std::string_view kStageForm =
    "SRC or SRC:DST, paths without ':', DST relative to the job's cwd or absolute, like "
    "/data/imagenet:data";

// One --stage SRC[:DST], SRC made absolute against `cwd`. Without DST: SRC's place relative
// to `cwd` when SRC is below it, else its last name. kInvalid naming `field` and kStageForm.
struct StageArg {
  std::string src;
  std::string dst;
};
Result<StageArg> ParseStage(std::string_view text, const std::string& cwd, std::string_view field);

// "tree", "link", "stage" and back (false for another word).
std::string_view TransferKindName(TransferKind kind);
bool TransferKindFromName(std::string_view name, TransferKind* kind);

// Each transfer's fields as ValidateSpec judges them: absolute sources, destinations without
// ':' or NUL, 64-hex manifests, at most one tree (and links only with it), kMaxTransfers.
void CheckTransfers(const JobSpec& spec, std::vector<FieldError>& out);

// A JSON array of transfers, as a request's `field` gives them: kInvalid naming the item and
// key that is not what is expected. ValidateSpec judges the values.
Result<std::vector<Transfer>> ParseTransfers(std::string_view text, std::string_view field);

inline constexpr size_t kMaxCollect = 64;
// --collect's patterns and --collect-to as ValidateSpec judges them.
void CheckCollect(const JobSpec& spec, std::vector<FieldError>& out);
// --collect and --collect-to as one text for the stores ("" for none) and back.
std::string CollectToText(const JobSpec& spec);
Status CollectFromText(std::string_view text, JobSpec& spec);

// The transfers as one text for the stores ("" for none) and back.
std::string TransfersToText(const std::vector<Transfer>& transfers);
Result<std::vector<Transfer>> TransfersFromText(std::string_view text);

// Where a kStage or kLink transfer appears to a job running in `cwd`: its dst if absolute,
// else below `cwd` with "." and ".." parts resolved by name.
std::string TransferDestination(const Transfer& t, const std::string& cwd);

}  // namespace trainq
