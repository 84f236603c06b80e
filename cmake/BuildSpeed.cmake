# Precompiled headers and unity builds (`make release` and `make check` turn both on; a plain
# cmake tree has neither, so an edit recompiles one file and a missing #include shows).
#
# Precompiled headers: the library headers most files include, parsed once per group of
# targets compiled with the same flags (REUSE_FROM). Each group's headers are only those its
# layer may include (docs/architecture.md; src/core/layers_test.cc): no spdlog or Boost in
# core, os, sim, store or cli files. A group shares one PCH only where flags match: GCC
# ignores a PCH built with a macro the file lacks (-Winvalid-pch, an error with -Werror),
# clang refuses one built at another -O. Hence TRAINQ_VERSION and BOOST_ALL_NO_LIB are
# defined for every target (CMakeLists.txt), and in the fuzzing tree, where core, os, gpu and
# sim are compiled at -O1 with the fuzzer's coverage, those have their own group.
#
# Unity builds: a target's sources compiled a batch at a time, so each batch parses the
# headers and instantiates the templates once. Two files of a target that define the same
# name at file scope (in an anonymous namespace, or static) cannot share a batch: such a file
# is listed in cmake/unity_skip.txt and compiled alone.
option(TRAINQ_PCH "Precompiled headers for the heavy library headers" OFF)
option(TRAINQ_UNITY "Compile each target's sources in batches (unity build)" OFF)

set(trainq_pch_base
    <algorithm> <array> <chrono> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem>
    <fstream> <functional> <map> <memory> <optional> <set> <span> <string> <string_view>
    <utility> <variant> <vector> <fmt/format.h> <nlohmann/json.hpp>)
# The daemon and the Redis store: spdlog, and the daemon's Asio and Beast (src/api/asio.h
# first: Boost 1.74 needs <utility> before Asio, which the base list gives).
set(trainq_pch_daemon ${trainq_pch_base} <spdlog/spdlog.h> <boost/asio/io_context.hpp>
    <boost/asio/local/stream_protocol.hpp> <boost/asio/posix/stream_descriptor.hpp>
    <boost/asio/post.hpp> <boost/asio/signal_set.hpp> <boost/asio/steady_timer.hpp>
    <boost/asio/connect.hpp> <boost/asio/ip/tcp.hpp> <boost/asio/read.hpp>
    <boost/beast/core.hpp> <boost/beast/http.hpp>)
# The API library: Asio and Beast, no spdlog (the client's layer refuses it).
set(trainq_pch_api ${trainq_pch_base} <boost/asio/io_context.hpp>
    <boost/asio/local/stream_protocol.hpp> <boost/asio/posix/stream_descriptor.hpp>
    <boost/asio/post.hpp> <boost/asio/signal_set.hpp> <boost/asio/steady_timer.hpp>
    <boost/asio/connect.hpp> <boost/asio/ip/tcp.hpp> <boost/asio/read.hpp>
    <boost/beast/core.hpp> <boost/beast/http.hpp>)
set(trainq_pch_test <gtest/gtest.h> <gmock/gmock.h>)

# `root` gets `headers` compiled once; each of ARGN reuses it. Targets missing from this tree
# (tests, fuzzers, benchmarks) are passed over.
function(trainq_pch_group root headers)
  if(NOT TRAINQ_PCH OR NOT TARGET ${root})
    return()
  endif()
  target_precompile_headers(${root} PRIVATE ${${headers}})
  foreach(t ${ARGN})
    if(TARGET ${t})
      target_precompile_headers(${t} REUSE_FROM ${root})
    endif()
  endforeach()
endfunction()

function(trainq_apply_build_speed)
  # -O1 and the fuzzer's coverage (CMakeLists.txt, TRAINQ_FUZZ) split the plain group.
  set(fuzzed trainq_os trainq_gpu trainq_sim spec_fuzz endpoint_fuzz trace_fuzz placement_fuzz
      records_fuzz auth_fuzz sbatch_fuzz config_fuzz redis_url_fuzz manifest_fuzz
      trainq_fuzz_files)
  set(plain trainq_crypto trainq_crypto_dl trainq-shim sched_bench trainq_cli trainq)
  if(TRAINQ_FUZZ)
    trainq_pch_group(trainq_core trainq_pch_base ${fuzzed})
    trainq_pch_group(trainq_store trainq_pch_base ${plain})
  else()
    trainq_pch_group(trainq_core trainq_pch_base ${fuzzed} trainq_store ${plain})
  endif()
  trainq_pch_group(trainq_api_client trainq_pch_api trainq_api_client_dl trainq_api)
  trainq_pch_group(trainq_redis trainq_pch_daemon trainq_daemon trainqd daemon_bench)
  set(trainq_pch_base_test ${trainq_pch_base} ${trainq_pch_test})
  set(trainq_pch_daemon_test ${trainq_pch_daemon} ${trainq_pch_test})
  trainq_pch_group(core_tests trainq_pch_base_test os_tests sim_tests cli_tests)
  trainq_pch_group(daemon_tests trainq_pch_daemon_test store_tests)

  # GCC 12 at -O3 sees a std::string copy out of bounds in this file when the PCH comes first
  # (-Warray-bounds, a known false positive that depends on inlining): it compiles as before.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/core/sbatch.cc
                              PROPERTIES SKIP_PRECOMPILE_HEADERS ON)

  if(TRAINQ_UNITY)
    # A batch of one file gains nothing, and GCC's -Wsubobject-linkage takes an included
    # file for a header (src/api/http_server.cc's Impl uses its anonymous namespace).
    get_property(targets DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(srcs ${t} SOURCES)
      list(FILTER srcs INCLUDE REGEX "\\.cc$")
      list(LENGTH srcs n)
      if(n LESS 2)
        set_target_properties(${t} PROPERTIES UNITY_BUILD OFF)
      endif()
    endforeach()
    # A batch is one object in the static library: a binary that needs one file of it links
    # them all. trainq-shim (trainq_os and core only, nothing but libc loaded) would then need
    # snapshot.cc's SHA-256 from trainq_crypto; the os library is compiled file by file.
    set_target_properties(trainq_os PROPERTIES UNITY_BUILD OFF)
    # trainq-man links the client's library and the daemon's, so both builds of the HTTP
    # client: file by file, it takes http_client.cc from one and tls_call.cc from the other;
    # as one batch, the two definitions of http_client.cc's functions would meet.
    set_target_properties(trainq_api_client PROPERTIES UNITY_BUILD OFF)
    # The tests' files share helper names too often (kT0, Job, Gpu...) to be batched.
    foreach(t core_tests os_tests store_tests sim_tests daemon_tests cli_tests man_tests)
      if(TARGET ${t})
        set_target_properties(${t} PROPERTIES UNITY_BUILD OFF)
      endif()
    endforeach()
    file(STRINGS ${CMAKE_SOURCE_DIR}/cmake/unity_skip.txt skip REGEX "^[^#]")
    list(TRANSFORM skip STRIP)
    list(TRANSFORM skip PREPEND ${CMAKE_SOURCE_DIR}/)
    set_source_files_properties(${skip} ${CMAKE_BINARY_DIR}/web_assets_data.cc
                                PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
endfunction()
