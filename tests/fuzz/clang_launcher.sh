#!/bin/sh
# CMake runs "clang_launcher.sh CLANG++ <the project's compiler> ARGS..." for the fuzz targets'
# compile and link steps: the same command line, with clang++ in place of the compiler, since
# libFuzzer's coverage instrumentation is clang's alone.
clang="$1"
shift 2
exec "$clang" "$@"
