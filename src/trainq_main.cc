// trainq: a GPU-aware queue for deep-learning training jobs.
#include "src/cli/cli.h"

int main(int argc, char** argv) { return trainq::RunCli(argc, argv); }
