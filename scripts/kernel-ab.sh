#!/usr/bin/env bash
# In-process A B of the K-quant rows kernels: builds microbench/ab/rows_ab.c
# against two variants of src/kernels/dot_kquant_x8_avx2.c (the same file
# with different flags, or an edited copy) and runs it; the two alternate
# call by call, so a drifting host slows both alike (rows_ab.c says more).
#
#   scripts/kernel-ab.sh [-a FILE_A] [-b FILE_B] [-A CFLAGS_A] [-B CFLAGS_B] -- \
#       N_IN N_OUT ROWS TYPE REPS BLOCK_A BLOCK_B [THREADS [PANEL_B]]
#
# FILE_A, FILE_B default to the tree's file; both are compiled with the
# build's compiler and its flags for the kernels library (BUILD, default build/, built
# first by make build). Example, the act block of 184 rows against 92:
#   scripts/kernel-ab.sh -- 2048 8192 529 q4_K 8 92 184 2
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
file_a=src/kernels/dot_kquant_x8_avx2.c file_b=src/kernels/dot_kquant_x8_avx2.c
flags_a="" flags_b=""
while getopts "a:b:A:B:" opt; do
  case $opt in
  a) file_a=$OPTARG ;;
  b) file_b=$OPTARG ;;
  A) flags_a=$OPTARG ;;
  B) flags_b=$OPTARG ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
flags_make=$build/CMakeFiles/tps_kernels.dir/flags.make
if [ ! -f "$flags_make" ] || [ ! -f "$build/libtps_kernels.a" ]; then
  echo "kernel-ab: no kernels library in $build/ (run make build first)" >&2
  exit 1
fi
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cflags="$(sed -n 's/^C_DEFINES = //p; s/^C_INCLUDES = //p; s/^C_FLAGS = //p' "$flags_make" | tr '\n' ' ')"
out=$build/ab
mkdir -p "$out"
renamed() { # PREFIX: the file's exported kernels renamed PREFIX_name
  for s in kernel_rows_q4_K_r8_avx2 kernel_rows_q6_K_r8_avx2 kernel_rows_q5_K_r8_avx2 \
    kernel_rows_q5_K_avx2 kernel_rows_panel_avx2; do
    printf ' -D%s=%s_%s' "$s" "$1" "$s"
  done
}
# shellcheck disable=SC2086,SC2046 # the flags are word lists
{
  "$cc" $cflags $(renamed A) $flags_a -c "$file_a" -o "$out/a.o"
  "$cc" $cflags $(renamed B) $flags_b -c "$file_b" -o "$out/b.o"
  "$cc" $cflags -Imicrobench -c microbench/ab/rows_ab.c -o "$out/rows_ab.o"
  "$cc" $cflags "$out/rows_ab.o" "$out/a.o" "$out/b.o" "$build/libtps_kernels.a" \
    "$build/libtps_base.a" -lm -lpthread -o "$out/rows_ab"
}
exec "$out/rows_ab" "$@"
