#!/bin/sh
# A stand-in for the kernel harness in tests: writes a gpuattest results
# file with two cases whose samples are lognormal-ish around 1000 ns.
# usage: harness.sh OUT [SCALE_OF_SECOND_CASE] [STATUS_OF_SECOND_CASE]
# Reads GPUATTEST_SEED and GPUATTEST_REPEATS like the real harness.
out=$1
scale=${2:-1}
status=${3:-passed}
seed=${GPUATTEST_SEED:-0}
reps=${GPUATTEST_REPEATS:-20}
awk -v seed="$seed" -v reps="$reps" -v sb="$scale" -v st="$status" 'BEGIN {
  srand(seed + 1)
  printf "{\"schema\":\"https://gpuattest.dev/results/v1\",\"tool\":\"test-harness 0\",\"backend\":\"cpu\",\"cases\":["
  for (c = 0; c < 2; c++) {
    name = (c == 0) ? "copy" : "scale"; s = (c == 0) ? 1 : sb; cs = (c == 0) ? "passed" : st
    printf "%s{\"name\":\"%s/n=1024/seed=%d\",\"kernel\":\"%s\",\"status\":\"%s\",\"flops\":1024,\"bytes\":8192,", (c ? "," : ""), name, seed, name, cs
    printf "\"config\":{\"n\":\"1024\",\"seed\":\"%d\",\"repeats\":\"%d\"},\"output_sha256\":\"%064d\",\"samples_ns\":[", seed, reps, c
    for (i = 0; i < reps; i++) {
      v = 1000 * s * exp(0.04 * (rand() + rand() + rand() - 1.5))
      printf "%s%.1f", (i ? "," : ""), v
    }
    printf "]}"
  }
  printf "]}\n"
}' > "$out"
