#include "src/store/sqlite/schema.h"

#include <optional>
#include <string>

#include <fmt/format.h>

#include "src/core/version.h"

namespace trainq::sqlite {

namespace {

// Version 1. Arrays (command, env, GPU lists) are JSON text; unsigned 64-bit values are
// stored bit for bit in SQLite's signed integers. AUTOINCREMENT keeps ids from ever being
// reused, even after the highest job is deleted.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  state TEXT NOT NULL CHECK (state IN ('queued', 'blocked', 'starting', 'running',
                                       'succeeded', 'failed', 'cancelled')),
  name TEXT NOT NULL,
  command TEXT NOT NULL,
  cwd TEXT NOT NULL,
  env TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  mem_bytes INTEGER,
  mem_percent REAL,
  cpus INTEGER NOT NULL,
  priority INTEGER NOT NULL,
  retries INTEGER NOT NULL,
  user TEXT NOT NULL,
  submitted_at INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  not_before INTEGER NOT NULL DEFAULT 0
);
-- Listing the few waiting jobs among many done ones must not scan the table.
CREATE INDEX jobs_state_id ON jobs (state, id);

CREATE TABLE attempts (
  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  n INTEGER NOT NULL,
  state TEXT NOT NULL,
  node TEXT NOT NULL,
  gpu_indices TEXT NOT NULL,
  gpu_uuids TEXT NOT NULL,
  reserved_bytes INTEGER NOT NULL,
  cpus INTEGER NOT NULL,
  run_dir TEXT NOT NULL,
  log_path TEXT NOT NULL,
  pid INTEGER NOT NULL DEFAULT 0,
  pid_start_ticks INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  exit_code INTEGER,
  signal INTEGER,
  oom INTEGER NOT NULL DEFAULT 0,
  peak_mem_bytes INTEGER NOT NULL DEFAULT 0,
  end_reason TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, n)
) WITHOUT ROWID;

CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
)sql";

// Version 2: dependencies (JSON arrays of job ids, read back with json_each to find a
// job's dependents among the few blocked jobs), the wall-clock limit, and the
// MASTER_PORT an attempt holds (so the port pool can be rebuilt after a restart).
constexpr char kSchemaV2[] = R"sql(
ALTER TABLE jobs ADD COLUMN after TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN after_any TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN time_limit_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN master_port INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 3: when a job last became queued (aging counts from there, not from its submit),
// set to submitted_at for the jobs already stored. Leases go: the one daemon of a SQLite
// store holds its lock file, and a cluster's leader lease lives in the cluster's store.
constexpr char kSchemaV3[] = R"sql(
ALTER TABLE jobs ADD COLUMN queued_at INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET queued_at = submitted_at;
DROP TABLE leases;
)sql";

// Version 4: the Idempotency-Key of the submit that stored each job, so a request sent
// again after a lost answer finds the ids it already got.
constexpr char kSchemaV4[] = R"sql(
ALTER TABLE jobs ADD COLUMN submit_key TEXT;
CREATE INDEX jobs_submit_key ON jobs (submit_key, user) WHERE submit_key IS NOT NULL;
)sql";

// Version 5: API tokens, kept as SHA-256 digests only. Revoked tokens stay (listed as
// revoked), so a name is unique only among the live ones.
constexpr char kSchemaV5[] = R"sql(
CREATE TABLE tokens (
  name TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL CHECK (role IN ('read', 'submit', 'admin')),
  user TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  revoked_at INTEGER NOT NULL DEFAULT 0,
  created_by TEXT NOT NULL
);
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;
)sql";

// Version 6: where a job may run in a cluster (--node, --exclude-node as JSON arrays of
// names) and how many nodes it spans (--nodes).
constexpr char kSchemaV6[] = R"sql(
ALTER TABLE jobs ADD COLUMN nodes TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN exclude_nodes TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN num_nodes INTEGER NOT NULL DEFAULT 1;
)sql";

// Version 7: the researcher's workflow: groups (sweeps, arrays) and their running limit, the
// array index, the run record (JSON), notifications, sbatch's Slurm variables, gates.
constexpr char kSchemaV7[] = R"sql(
ALTER TABLE jobs ADD COLUMN grp INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN group_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN array_index INTEGER NOT NULL DEFAULT -1;
ALTER TABLE jobs ADD COLUMN record TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN notify_url TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN mail TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN slurm_env INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN gate_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN gate_ticks INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_grp ON jobs (grp) WHERE grp != 0;
)sql";

// Version 8: host limits each attempt's cgroup holds (--mem-limit in bytes, --max-procs);
// 0: the daemon's defaults.
constexpr char kSchemaV8[] = R"sql(
ALTER TABLE jobs ADD COLUMN mem_limit_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_procs INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 9: what each user keeps (Store::Footprint). A large environment is stored once per
// submit in envs and shared by that submit's jobs (env_id; 0: the job's own env column
// holds it); stored_bytes is a job's record size (a shared env counts on the job that stored
// it); log_bytes what an attempt's log came to. Rows from before get their size.
constexpr char kSchemaV9[] = R"sql(
CREATE TABLE envs (
  id INTEGER PRIMARY KEY,
  body TEXT NOT NULL
);
ALTER TABLE jobs ADD COLUMN env_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_env ON jobs (env_id) WHERE env_id != 0;
CREATE INDEX jobs_user_state ON jobs (user, state);
UPDATE jobs SET stored_bytes = length(CAST(command AS BLOB)) + length(CAST(env AS BLOB)) +
  length(CAST(cwd AS BLOB)) + length(CAST(name AS BLOB)) + length(CAST(record AS BLOB)) +
  length(CAST(reason AS BLOB)) + 256;
)sql";

// Version 10: the accounting rows of jobs `trainq clean` forgot (Store::AcctRecords), as
// JSON (AcctToJson), with what they are looked up by.
constexpr char kSchemaV10[] = R"sql(
CREATE TABLE acct (
  id INTEGER PRIMARY KEY,
  user TEXT NOT NULL,
  ended_at INTEGER NOT NULL,
  row TEXT NOT NULL
);
CREATE INDEX acct_user ON acct (user, ended_at);
)sql";

// Version 11: what a job's GPUs and nodes must be (--gpu-type, --constraint).
constexpr char kSchemaV11[] = R"sql(
ALTER TABLE jobs ADD COLUMN gpu_type TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN constraints TEXT NOT NULL DEFAULT '[]';
)sql";

// Version 12: a job's container (ContainerToText; '': none).
constexpr char kSchemaV12[] = R"sql(
ALTER TABLE jobs ADD COLUMN container TEXT NOT NULL DEFAULT '';
)sql";

// Version 13: what a job needs shipped to its node (TransfersToText; '': nothing), and what
// comes back (CollectToText).
constexpr char kSchemaV13[] = R"sql(
ALTER TABLE jobs ADD COLUMN transfers TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN collect TEXT NOT NULL DEFAULT '';
)sql";

// Version 14: what each attempt did with its GPUs (Attempt::usage, Store::AddUsage).
constexpr char kSchemaV14[] = R"sql(
ALTER TABLE attempts ADD COLUMN held_gpu_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN util_known_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN busy_gpu_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN mem_byte_s INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 15: how a job is warned and stopped (StopToText; '': the defaults).
constexpr char kSchemaV15[] = R"sql(
ALTER TABLE jobs ADD COLUMN stop TEXT NOT NULL DEFAULT '';
)sql";

// Version 16: whether a job was submitted held (--hold; JobSpec::hold).
constexpr char kSchemaV16[] = R"sql(
ALTER TABLE jobs ADD COLUMN hold INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 17: the trainq version that last migrated the schema, so an older trainq that
// refuses the database can say which version to install.
constexpr char kSchemaV17[] = R"sql(
CREATE TABLE schema_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql";

// Version 18: interactive sessions (`trainq shell`; JobSpec::interactive and no_log).
constexpr char kSchemaV18[] = R"sql(
ALTER TABLE jobs ADD COLUMN interactive INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN no_log INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 19: elastic jobs' largest size (JobSpec::max_gpus; 0: not elastic).
constexpr char kSchemaV19[] = R"sql(
ALTER TABLE jobs ADD COLUMN max_gpus INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 20: elastic gangs' largest node count (JobSpec::max_nodes; 0: a fixed count).
constexpr char kSchemaV20[] = R"sql(
ALTER TABLE jobs ADD COLUMN max_nodes INTEGER NOT NULL DEFAULT 0;
)sql";

constexpr char kWriterKey[] = "written_by";

constexpr Migration kMigrations[] = {
    {1, kSchemaV1},   {2, kSchemaV2},   {3, kSchemaV3},   {4, kSchemaV4},   {5, kSchemaV5},
    {6, kSchemaV6},   {7, kSchemaV7},   {8, kSchemaV8},   {9, kSchemaV9},   {10, kSchemaV10},
    {11, kSchemaV11}, {12, kSchemaV12}, {13, kSchemaV13}, {14, kSchemaV14}, {15, kSchemaV15},
    {16, kSchemaV16}, {17, kSchemaV17}, {18, kSchemaV18}, {19, kSchemaV19}, {20, kSchemaV20},
};

bool HasSchemaInfo(Db& db) {
  Result<int64_t> n = db.QueryInt(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_info'");
  return n.ok() && *n > 0;
}

// The version of the trainq that last migrated the schema; nullopt where the database does
// not say (older than schema 17, or the row missing).
std::optional<std::string> SchemaWriter(Db& db) {
  if (!HasSchemaInfo(db)) return std::nullopt;
  Result<Query> query = db.Prepare("SELECT value FROM schema_info WHERE key = ?");
  if (!query.ok()) return std::nullopt;
  query->Bind(1, kWriterKey);
  Result<bool> row = query->Step();
  if (!row.ok() || !*row) return std::nullopt;
  return query->Text(0);
}

Status ApplyStep(Db& db, const Migration& step) {
  Result<Transaction> txn = Transaction::Begin(db, Transaction::Kind::kWrite);
  if (!txn.ok()) return txn.status();
  Result<int64_t> version = db.QueryInt("PRAGMA user_version");
  if (!version.ok()) return version.status();
  if (*version >= step.version) return Status::Ok();  // another process got here first
  if (*version != step.version - 1) {
    return Status::Internal("schema version " + std::to_string(*version) +
                            " cannot be migrated to " + std::to_string(step.version));
  }
  TRAINQ_RETURN_IF_ERROR(db.Exec(step.sql));
  // user_version lives in the database header, so it commits or rolls back with the step.
  std::string set_version = "PRAGMA user_version = " + std::to_string(step.version);
  TRAINQ_RETURN_IF_ERROR(db.Exec(set_version.c_str()));
  if (HasSchemaInfo(db)) {
    Result<int64_t> written = db.Run(
        "INSERT INTO schema_info (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        kWriterKey, kVersion);
    if (!written.ok()) return written.status();
  }
  return txn->Commit();
}

}  // namespace

std::span<const Migration> SchemaMigrations() { return kMigrations; }

Status Migrate(Db& db, std::span<const Migration> steps) {
  int latest = steps.empty() ? 0 : steps.back().version;
  Result<int64_t> version = db.QueryInt("PRAGMA user_version");
  if (!version.ok()) return version.status();
  if (*version > latest) {
    std::optional<std::string> writer = SchemaWriter(db);
    return Status::Unavailable(
        fmt::format("the database has schema version {}, written by {}, but this trainq ({}) knows "
                    "versions up to {}; upgrade trainq to open it{}",
                    *version, writer ? fmt::format("trainq {}", *writer) : "a newer trainq",
                    kVersion, latest, writer ? fmt::format(" ({} or newer)", *writer) : ""));
  }
  for (const Migration& step : steps) {
    if (step.version <= *version) continue;
    TRAINQ_RETURN_IF_ERROR(ApplyStep(db, step));
  }
  return Status::Ok();
}

}  // namespace trainq::sqlite
