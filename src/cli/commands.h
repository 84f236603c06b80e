// One function per CLI command; each returns the process exit code and prints errors as
// one line on stderr.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "src/cli/client.h"
#include "trainq/status.h"

namespace trainq {

struct SubmitArgs {
  std::vector<std::string> command;
  int gpus = 1;
  std::string mem;
  int cpus = 1;
  std::string name;
  int priority = 0;
  int retries = 3;
  std::string cwd;
  std::vector<std::string> env;
  std::string from;                        // --from FILE
  std::vector<std::string> after;          // --after ID[,ID]: each value a comma-separated list
  std::vector<std::string> after_any;      // --after-any ID[,ID]
  std::string time;                        // --time: checked by the daemon (ParseTimeLimit)
  std::vector<std::string> nodes;          // --node NAME[,NAME]: each value a comma list
  std::vector<std::string> exclude_nodes;  // --exclude-node NAME[,NAME]
  int num_nodes = 1;                       // --nodes, -N
  bool json = false;
};

struct ListArgs {
  bool all = false;
  std::string state;
  int limit = 0;
  bool json = false;
  std::string user;   // only this user's jobs
  bool mine = false;  // only the caller's (the socket's user, or the token's)
};

// `trainq token create`.
struct TokenArgs {
  std::string name;
  std::string role;     // read, submit or admin
  std::string user;     // "": the caller's
  std::string expires;  // a duration (30d); "": never
  bool json = false;
};

int Fail(const Status& status);
// "job id: 'abc' is not a job id; ..." as kInvalid.
Result<int64_t> ParseJobId(const std::string& text);

int CmdSubmit(Client& client, const SubmitArgs& args);
int CmdList(Client& client, const ListArgs& args);
int CmdShow(Client& client, const std::string& id, bool json);
int CmdLogs(Client& client, const std::string& id, bool follow, int attempt);
int CmdCancel(Client& client, const std::vector<std::string>& ids);
int CmdRetry(Client& client, const std::string& id);
int CmdGpus(Client& client, bool json);
int CmdExplain(Client& client, const std::string& id, bool json);
// `trainq daemon --foreground`: becomes trainqd for this state dir.
int CmdDaemonForeground(Client& client);
int CmdDaemonStart(Client& client);
int CmdDaemonStop(Client& client);
int CmdDaemonStatus(Client& client, bool json);
// A consistent copy of the database (SQLite's online backup) at `path`, made by the daemon.
int CmdDaemonBackup(Client& client, const std::string& path);
// gpu_topology.cc: `trainq gpus --topo`
int CmdGpuTopology(Client& client, bool json);
// `trainq config check`: trainqd --check-config, so the client never parses the config.
int CmdConfigCheck(Client& client);
// config_commands.cc
int CmdConfigShow(Client& client, bool json);
int CmdConfigGet(Client& client, const std::string& key, bool json);  // empty key: show
int CmdConfigSet(Client& client, const std::string& key, const std::string& value);
int CmdConfigUnset(Client& client, const std::string& key);
// token_commands.cc
int CmdTokenCreate(Client& client, const TokenArgs& args);
int CmdTokenList(Client& client, bool json);
int CmdTokenRevoke(Client& client, const std::string& name);

// node_commands.cc
int CmdNodes(Client& client, bool json);
int CmdNodeDrain(Client& client, const std::string& name, bool drain);

// A reply's "message" on stdout ("job 12 cancelled"), or the error: the exit code.
int PrintReplyMessage(const Result<nlohmann::json>& r);

}  // namespace trainq
