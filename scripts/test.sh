#!/usr/bin/env bash
# `make test`: every check CI runs, one phase at a time, with the time each took printed at
# the end (also when a phase fails, which stops the run).
#
# The phases from a clean clone on the 2-core CI machine, in seconds: before precompiled
# headers, unity batches, line tables only in the sanitized tree and sharded unit tests
# (cmake/BuildSpeed.cmake), after them, and now, with the package phase (tests/package).
# The two builds are CPU-bound (about 700 and 960 CPU-seconds): on two cores they alone
# take some 830 s.
#
#   phase                          before   after     now
#   format                              4       4       5
#   release build (-Werror)           505     372     353
#   test build (ASan+UBSan, fuzz)     878     522     486
#   unit tests (sanitized)            168      54      57
#   fuzzers                            59      59      59
#   integration tests                 466     432     413
#   package (deb, lintian, wheel)       -       -      74
#   total, less the benchmark smoke  2080    1443    1447
set -uo pipefail
cd "$(dirname "$0")/.."
# The release tree is built as `make` builds it, with warnings as errors.
export WERROR=ON
phases=(
  "format:make -s format-check"
  "release build (-Werror):make -s release"
  "test build (clang, ASan+UBSan, fuzzers):make -s check"
  "unit tests (sanitized):make -s unit"
  "fuzzers:make -s fuzz"
  "integration tests:make -s integration"
  "package (deb, lintian, upgrade, wheel):make -s package-test"
  "benchmark smoke (printed, not judged):make -s bench-smoke"
)
report=()
status=0
total_start=$(date +%s)
for phase in "${phases[@]}"; do
  name=${phase%%:*}
  start=$(date +%s)
  echo "== $name"
  bash -c "${phase#*:}"
  status=$?
  report+=("$(printf '%-42s %5ds%s' "$name" $(( $(date +%s) - start )) \
    "$([ $status -ne 0 ] && echo '  FAILED')")")
  [ $status -ne 0 ] && break
done
echo
echo "phase                                       time"
printf '%s\n' "${report[@]}"
printf '%-42s %5ds\n' "total" $(( $(date +%s) - total_start ))
exit $status
