#!/bin/sh
# A stand-in for the kernel harness's sustained mode (--duration) in
# burn-in tests: appends GPUATTEST_DURATION to duration.log, sleeps that
# long (SUS_SLEEP seconds instead when set), then writes results with a
# "sustained" block and two cases.
# usage: sustained.sh OUT
# Knobs (environment): SUS_BACKEND (cpu), SUS_DUTY (0.98), SUS_BAD (repeats
# of case scale that differ, 0), SUS_RSS_STEP (host RSS growth per memory
# sample, 0), SUS_ERROR (the loop's error), SUS_UUID (device_uuid),
# SUS_DEVICES (UUIDs, comma-separated: a run over several devices, each
# with its own loop, listed under "devices"), SUS_WINDOW (1: the results
# give the loop's window, from the host clock), SUS_SETUP (seconds of
# setup before the loop starts, 0), SUS_MARK (a file created just before
# the loop's window opens), SUS_MARK_IN (one created just after),
# SUS_NOWINDOW (1: no loop window after all), SUS_BURN
# (the burn's TFLOP/s per device, comma-separated, in the order of
# SUS_DEVICES, or of the one device: six windows each), SUS_SLOW
# (I:F: device I's last two windows run at F times its rate).
out=$1
echo "${GPUATTEST_DURATION:-unset}" >> duration.log
sleep "${SUS_SETUP:-0}"
[ -n "${SUS_MARK:-}" ] && touch "$SUS_MARK"
from=0 to=0
[ "${SUS_WINDOW:-0}" = 1 ] && from=$(date +%s%N)
[ -n "${SUS_MARK_IN:-}" ] && touch "$SUS_MARK_IN"
sleep "${SUS_SLEEP:-${GPUATTEST_DURATION:-0}}"
[ "${SUS_WINDOW:-0}" = 1 ] && to=$(date +%s%N)
[ "${SUS_NOWINDOW:-0}" = 1 ] && from=0 to=0
awk -v backend="${SUS_BACKEND:-cpu}" -v duty="${SUS_DUTY:-0.98}" -v bad="${SUS_BAD:-0}" -v step="${SUS_RSS_STEP:-0}" \
	-v err="${SUS_ERROR:-}" -v uuid="${SUS_UUID:-}" -v devices="${SUS_DEVICES:-}" -v dur="${GPUATTEST_DURATION:-1}" \
	-v from="$from" -v to="$to" -v burn="${SUS_BURN:-}" -v slow="${SUS_SLOW:-}" '
function window() { return from > 0 ? sprintf(",\"loop_from_unix_ns\":%s,\"loop_to_unix_ns\":%s", from, to) : "" }
function burnof(i,    r, w, s, f, b, out) {
  if (nb < i) return ""
  r = rate[i]; s = 1
  out = sprintf(",\"burn\":{\"kernel\":\"hmma\",\"launches\":60,\"flops\":%.17g,\"busy_s\":%.17g,\"tflops\":%.17g,\"window_s\":%g,\"windows\":[", 0, 0, r, dur / 6)
  f = 0; b = 0
  for (w = 0; w < 6; w++) {
    s = (slowdev == i - 1 && w >= 4) ? slowf : 1
    out = out sprintf("%s{\"from_s\":%g,\"to_s\":%g,\"flops\":%.17g,\"busy_s\":%.17g}", (w ? "," : ""), w * dur / 6, (w + 1) * dur / 6, r * s * 1e12 * dur / 6 * 0.9, dur / 6 * 0.9)
    f += r * s * 1e12 * dur / 6 * 0.9; b += dur / 6 * 0.9
  }
  out = out "]}"
  sub(/"flops":0,"busy_s":0,"tflops":[^,]*/, sprintf("\"flops\":%.17g,\"busy_s\":%.17g,\"tflops\":%.17g", f, b, f / b / 1e12), out)
  return out
}
BEGIN {
  nb = split(burn, rate, ",")
  slowdev = -1
  if (slow != "") { split(slow, sv, ":"); slowdev = sv[1] + 0; slowf = sv[2] + 0 }
  consistent = (bad == 0 && err == "") ? "true" : "false"
  printf "{\"schema\":\"https://gpuattest.dev/results/v1\",\"tool\":\"sustained-test 0\",\"backend\":\"%s\",", backend
  if (backend == "cuda") printf "\"device\":\"Test GPU\","
  if (uuid != "") printf "\"device_uuid\":\"%s\",", uuid
  if (devices != "") {
    nd = split(devices, dev, ",")
    printf "\"devices\":["
    for (i = 1; i <= nd; i++) printf "%s{\"ordinal\":%d,\"uuid\":\"%s\",\"cases\":2,\"passed\":2,\"sustained\":{\"elapsed_s\":%s,\"busy_s\":%s,\"duty_cycle\":%s,\"iterations\":100,\"outputs_checked\":198,\"mismatches\":0%s%s}}", (i > 1 ? "," : ""), i - 1, dev[i], dur, dur * duty, duty, window(), burnof(i)
    printf "],"
  }
  printf "\"sustained\":{\"duration_s\":%s,\"elapsed_s\":%s,\"busy_s\":%s,\"duty_cycle\":%s,", dur, dur, dur * duty, duty
  printf "\"timing\":\"%s\",\"iterations\":100,\"outputs_checked\":198,\"mismatches\":%d,\"consistent\":%s,", (backend == "cuda" ? "cuda_events" : "steady_clock"), bad, consistent
  printf "\"check\":\"bytes\",\"memory_interval_s\":0.1%s%s,\"memory\":[", window(), (devices == "" ? burnof(1) : "")
  for (i = 0; i < 6; i++) {
    rss = (i == 0) ? 50000000 : 100000000 + i * step
    printf "%s{\"elapsed_s\":%g,\"iteration\":%d,\"host_rss_bytes\":%d}", (i ? "," : ""), i * 0.1, i * 20, rss
  }
  printf "]"
  if (err != "") printf ",\"error\":\"%s\"", err
  printf "},\"cases\":["
  for (c = 0; c < 2; c++) {
    name = (c == 0) ? "copy" : "scale"; m = (c == 1) ? bad : 0
    st = (m > 0) ? "failed" : "passed"; msg = (m > 0) ? "the output of repeat 7 differs from repeat 1" : ""
    printf "%s{\"name\":\"%s/n=1024/seed=1\",\"kernel\":\"%s\",\"status\":\"%s\",\"message\":\"%s\",", (c ? "," : ""), name, name, st, msg
    printf "\"output_sha256\":\"%064d\",\"sustained\":{\"repeats\":100,\"mismatches\":%d,", c, m
    if (m > 0) printf "\"first_mismatch\":7,"
    printf "\"busy_s\":0.4}}"
  }
  printf "]}\n"
}' > "$out"
