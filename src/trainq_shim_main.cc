// trainq-shim RUN_DIR: supervises one attempt (src/os/shim.cc). The daemon starts one per
// attempt, from lib/trainq beside its own bin/ (or beside trainqd in a build tree); it links
// only what supervising needs, so it starts about as fast as the job itself.
#include <cstdio>
#include <string>

#include "src/os/process.h"

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] != '/') {
    std::fprintf(stderr,
                 "usage: trainq-shim RUN_DIR (an absolute path): supervises one attempt of a "
                 "trainq job; trainqd starts it, people do not\n");
    return 2;
  }
  return trainq::RunShim(argv[1]);
}
