// trainq: a GPU-aware queue for deep-learning training jobs.
#include "src/cli/cli.h"
#include "src/cli/slurm_tools.h"

int main(int argc, char** argv) {
  // Run as srun, scontrol or sbatch (links a `trainq sbatch` job finds first on its PATH).
  if (std::optional<int> code = trainq::RunSlurmTool(argc, argv)) return *code;
  return trainq::RunCli(argc, argv);
}
