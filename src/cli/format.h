// Human output of the CLI: tables and job details from the API's JSON, read through Reply
// (a reply of an unexpected shape leaves its error there for the caller to report).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/cli/reply.h"

namespace trainq {

// Left-aligned columns separated by two spaces; the first row is the header.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

// `cluster`: with a NODE column (each job's latest attempt's node, a gang's nodes). A job's
// INFO says how long its latest attempt ran (or runs, until `now_ms`, Unix ms) and its peak.
std::string JobsTable(const std::vector<Reply>& jobs, bool cluster = false, int64_t now_ms = 0);
std::string JobDetails(const Reply& job, int64_t now_ms = 0);
// A time as the daemon writes it ("2026-11-22T10:00:01.123Z", UTC) in Unix ms.
std::optional<int64_t> IsoMs(const std::string& text);
std::string GpusTable(const Reply& gpus);
// `trainq explain`: a job's reason and the numbers behind it.
std::string ExplainReport(const Reply& doc);
// "2x20.0GiB", "2xwhole", "CPUx1".
std::string RequestSummary(const Reply& job);

}  // namespace trainq
