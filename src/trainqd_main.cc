// trainqd: the trainq daemon and the shim that supervises each job.
#include "src/daemon/command_line.h"

int main(int argc, char** argv) { return trainq::RunTrainqd(argc, argv); }
