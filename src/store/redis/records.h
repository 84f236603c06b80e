// How jobs, attempts, nodes and tokens are laid out as Redis hash fields (docs/cluster.md,
// "The Redis store"). Lists of strings (argv, environment, GPU uuids) are length-prefixed
// ("6:python8:train.py"), so any bytes survive; lists of numbers are comma-separated.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/deps.h"
#include "src/store/cluster.h"
#include "src/store/redis/redis_conn.h"

namespace trainq::redis {

using Fields = std::vector<std::pair<std::string, std::string>>;

std::string EncodeStrings(const std::vector<std::string>& values);
Result<std::vector<std::string>> DecodeStrings(std::string_view text, std::string_view field);

// The fields of a new job (everything but its id) in state `state` with `reason`.
Fields NewJobFields(const JobSpec& spec, UnixMs now, const DepDecision& start);
// What `trainq update` may change (Store::UpdateJob; kJobFields's `change`) of a waiting job,
// or of a running one (`running`), as NewJobFields writes it; "" for a field NewJobFields
// leaves out (the field is then removed, and reads back as its default).
Fields ChangeableFields(const JobSpec& spec, bool running);

// From HGETALL's reply (an array of field, value, ...). kInternal naming the field when a
// stored value cannot be read.
Result<Job> ReadJob(const redisReply* hash);
Result<Attempt> ReadAttempt(const redisReply* hash);
Result<NodeRecord> ReadNode(const redisReply* hash);
Result<TokenRecord> ReadToken(const redisReply* hash);

}  // namespace trainq::redis
