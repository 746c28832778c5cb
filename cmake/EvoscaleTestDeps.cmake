# With EVOSCALE_REQUIRE_TEST_DEPS (scripts/dev.sh build and test set it), configuring fails,
# naming the Debian package, when anything the tests, fuzzers or benches use is missing. Without
# it those parts are left out or skip themselves quietly (no clang: no fuzz targets; no MPI: a
# one-process trainer; no Chromium: web_dashboard skipped), which suits a partial build but
# would let CI pass without running them. CUDA is not among them: the GPU tests carry the label
# gpu, which scripts/dev.sh test leaves out on a machine without a GPU.
if(NOT EVOSCALE_BUILD_TESTS OR NOT EVOSCALE_BUILD_BENCH)
  message(FATAL_ERROR "EVOSCALE_REQUIRE_TEST_DEPS=ON needs EVOSCALE_BUILD_TESTS=ON and "
                      "EVOSCALE_BUILD_BENCH=ON")
endif()

set(_evoscale_missing)
macro(_evoscale_require what package)
  list(APPEND _evoscale_missing "  ${what} (Debian: ${package})")
endmacro()

# The tests' and benches' frameworks (the top-level CMakeLists.txt requires them again).
find_package(GTest QUIET)
if(NOT GTest_FOUND)
  _evoscale_require("GoogleTest" "libgtest-dev libgmock-dev")
endif()
find_package(benchmark QUIET)
if(NOT benchmark_FOUND)
  _evoscale_require("Google Benchmark" libbenchmark-dev)
endif()

# The fuzz targets (tests/fuzz, which reads the same cache entry).
find_program(EVOSCALE_CLANGXX NAMES clang++ clang++-14)
if(EVOSCALE_CLANGXX)
  execute_process(COMMAND ${EVOSCALE_CLANGXX} --print-runtime-dir
                  OUTPUT_VARIABLE _evoscale_clang_rt OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT EXISTS "${_evoscale_clang_rt}/libclang_rt.fuzzer-x86_64.a")
    _evoscale_require("clang's libFuzzer runtime" libclang-rt-14-dev)
  endif()
else()
  _evoscale_require("clang++ for the fuzz targets" "clang libclang-rt-14-dev")
endif()

# The trainer's multi-process jobs and their tests (trainer/ finds it again, quietly).
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI COMPONENTS CXX QUIET)
if(NOT MPI_CXX_FOUND)
  _evoscale_require("MPI" "openmpi-bin libopenmpi-dev")
endif()

# Programs tests run, which skip themselves (exit 77) when absent.
foreach(pair "node;nodejs" "chromium;chromium" "slurmctld;slurm-wlm" "slurmd;slurm-wlm"
             "munged;munge" "openssl;openssl")
  list(GET pair 0 program)
  list(GET pair 1 package)
  string(TOUPPER "EVOSCALE_TEST_PROGRAM_${program}" var)
  find_program(${var} ${program} PATHS /usr/sbin /sbin)
  if(NOT ${var})
    _evoscale_require("${program}" ${package})
  endif()
endforeach()

# The Python SDK's tests (tests/python) and the dashboard's browser test (tests/web).
foreach(pair "grpc;python3-grpcio" "google.protobuf;python3-protobuf" "optuna;python3-optuna"
             "pandas;python3-pandas" "pytest;python3-pytest" "yaml;python3-yaml"
             "setuptools;python3-setuptools" "pip;python3-pip")
  list(GET pair 0 module)
  list(GET pair 1 package)
  execute_process(COMMAND /usr/bin/python3 -c "import ${module}" RESULT_VARIABLE rc
                  OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    _evoscale_require("Python module ${module}" ${package})
  endif()
endforeach()
if(NOT EXISTS ${PROJECT_SOURCE_DIR}/tests/web/node_modules/playwright-core)
  list(APPEND _evoscale_missing "  tests/web/node_modules (npm ci --prefix tests/web)")
endif()

if(_evoscale_missing)
  list(JOIN _evoscale_missing "\n" _evoscale_missing)
  message(FATAL_ERROR "EVOSCALE_REQUIRE_TEST_DEPS: the tests need what is missing here:\n"
                      "${_evoscale_missing}\n"
                      "scripts/dev.sh build and test install all of it before configuring.")
endif()
message(STATUS "evoscale: every package the tests, fuzzers and benches need is here")
