#!/usr/bin/env bash
# `make test`: every check CI runs, one phase at a time, with the time each took printed at
# the end (also when a phase fails, which stops the run).
#
# The phases from a clean clone on the 2-core CI machine, in seconds: before precompiled
# headers, unity batches, line tables only in the sanitized tree and sharded unit tests
# (cmake/BuildSpeed.cmake), and after.
#
#   phase                          before   after
#   format                              4       4
#   release build (-Werror)           505     372
#   test build (ASan+UBSan, fuzz)     878     522
#   unit tests (sanitized)            168      54
#   fuzzers                            59      59
#   integration tests                 466     432
#   total, less the benchmark smoke  2080    1443
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
