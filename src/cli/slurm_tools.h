// Slurm's srun, scontrol and sbatch as a `trainq sbatch` job sees them: trainq run under one
// of those names (links in the folder the job's PATH puts first).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trainq {

// What the tool named by argv[0]'s file name does, with its exit code; nullopt when argv[0]
// names none of them (then trainq is trainq).
std::optional<int> RunSlurmTool(int argc, char** argv);

// srun: inside a job (SLURM_JOB_ID set), a step on its allocation; outside one, with --pty,
// an interactive session as `trainq salloc` with the same options.
int RunSrun(const std::vector<std::string>& args);

}  // namespace trainq
