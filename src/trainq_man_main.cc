// trainq-man OUTDIR: writes trainq's man pages (src/man/man_pages.h) into OUTDIR, at build
// time; not installed.
#include <cstdio>
#include <string>

#include "src/man/man_pages.h"
#include "src/os/run_dir.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trainq-man OUTDIR\n");
    return 2;
  }
  std::string dir = argv[1];
  trainq::Status made = trainq::MakeDirs(dir);
  for (const trainq::ManFile& file : trainq::TrainqManFiles()) {
    if (!made.ok()) break;
    made = trainq::WriteFileAtomic(dir + "/" + file.name, file.text, trainq::Durability::kNoSync);
  }
  if (!made.ok()) {
    std::fprintf(stderr, "trainq-man: %s\n", made.message().c_str());
    return 1;
  }
  return 0;
}
