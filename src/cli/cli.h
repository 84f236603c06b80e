// The trainq command line (README's CLI reference). Returns the process exit code:
// 0 success, 2 invalid input, 3 no such job, 1 anything else.
#pragma once

namespace trainq {

int RunCli(int argc, char** argv);

}  // namespace trainq
