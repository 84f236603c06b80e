// Human output of the CLI: tables and job details from the API's JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trainq {

// Left-aligned columns separated by two spaces; the first row is the header.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

std::string JobsTable(const nlohmann::json& jobs);
std::string JobDetails(const nlohmann::json& job);
std::string GpusTable(const nlohmann::json& gpus);
// `trainq explain`: a job's reason and the numbers behind it.
std::string ExplainReport(const nlohmann::json& doc);
// "1 GPU × 20.0 GiB", "2 whole GPUs", "CPU".
std::string RequestSummary(const nlohmann::json& job);

}  // namespace trainq
