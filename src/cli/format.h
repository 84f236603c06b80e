// Human output of the CLI: tables and job details from the API's JSON, read through Reply
// (a reply of an unexpected shape leaves its error there for the caller to report).
#pragma once

#include <string>
#include <vector>

#include "src/cli/reply.h"

namespace trainq {

// Left-aligned columns separated by two spaces; the first row is the header.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

std::string JobsTable(const std::vector<Reply>& jobs);
std::string JobDetails(const Reply& job);
std::string GpusTable(const Reply& gpus);
// `trainq explain`: a job's reason and the numbers behind it.
std::string ExplainReport(const Reply& doc);
// "2x20.0GiB", "2xwhole", "CPUx1".
std::string RequestSummary(const Reply& job);

}  // namespace trainq
