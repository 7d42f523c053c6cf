#!/usr/bin/env bash
# The device self-check (make gpu-selfcheck, or run.sh --selfcheck): proves
# on a GPU machine, from the bundle alone, that gpu-check loads, judges and
# catches what it claims. Run it first whenever a GPU machine is available:
#
#   bin/gpu-check/run.sh --selfcheck [--simulated [--gpus N]] [--part P] [--out DIR]
#
# Three parts, in this order (the fault last, so its Xid cannot reach the
# first part's telemetry):
#   1. the whole gpu-check (run.sh), with nvidia-smi logging utilization,
#      power against the limit, clocks, GPU and HBM temperature and
#      clock-event reasons at 2 Hz alongside, and a summary comparing
#      NVML's view with the harness's;
#   2. silent corruption on the real driver: a short sustained run on every
#      GPU with one repeat corrupted on one device must exit 1 naming the
#      repeat and that device's UUID; and one with one mantissa bit of the
#      tensor-core burn's last pass flipped on that device (what a stuck
#      multiplier bit does) must exit 1 naming the device's UUID;
#   3. a real illegal-address fault: exit 1, "the context is lost", later
#      cases "not run", then a clean run in a new process exits 0.
# DIR (default selfcheck) receives the log, the nvidia-smi CSV, each part's
# results and SELFCHECK.md, the page to commit as
# docs/gpu-runs/<date>-<gpu>.md. Exit 0 when every part behaved as it
# must, 1 otherwise.
#
# --simulated runs the same without a GPU, as the simulated 8-GPU HGX
# H100 node: part 1 is run.sh --simulated (GPUATTEST_FAKE_GPU=h100:8 and
# the cuda backend on the bundle's fake driver, simulated/libcuda.so.1,
# built from kernels/testdata/fakecuda), and so are parts 2 and 3;
# --gpus N simulates a node of N GPUs for parts 2 and 3 (1: the one-GPU
# machine a first self-check meets). Under emulation (run.sh's
# GPU_CHECK_QEMU=1: an arm64 bundle's binaries under qemu on x86_64) the
# simulated node has 2 GPUs, in all three parts, and says EMULATED. --part P runs part P alone (given
# twice, both).
# Everything it prints says SIMULATED; it proves the plumbing, never a GPU.
# --smi-fields prints the nvidia-smi fields part 1 queries on this
# driver and exits.
set -uo pipefail
cd "$(dirname "$0")"
# smi_fields are the nvidia-smi fields part 1 logs: the clock-event
# reasons are clocks_event_reasons.active from driver R535 on, and
# clocks_throttle_reasons.active before it.
smi_fields() {
	local reasons=clocks_event_reasons.active
	if ! nvidia-smi --query-gpu=$reasons --format=csv,noheader -i 0 >/dev/null 2>&1; then
		reasons=clocks_throttle_reasons.active
	fi
	echo "timestamp,index,uuid,utilization.gpu,power.draw,power.limit,clocks.sm,clocks.mem,temperature.gpu,temperature.memory,$reasons"
}
usage() { echo "usage: run.sh --selfcheck [--simulated [--gpus N]] [--part 1|2|3] [--out DIR] | --smi-fields" >&2; exit 2; }
# Under emulation (run.sh sets GPU_CHECK_EMULATED=1 when the bundle's
# binaries run under qemu) the simulated node has 2 GPUs, as run.sh's.
simulated=0 out=selfcheck simgpus=8 only=
[ "${GPU_CHECK_EMULATED:-}" = 1 ] && simgpus=2 # --simulated only
while [ $# -gt 0 ]; do
	case $1 in
	--simulated) simulated=1 ;;
	--out) [ $# -ge 2 ] || usage; out=$2; shift ;;
	--gpus) [ $# -ge 2 ] || usage; simgpus=$2; shift; case $simgpus in [1-9] | [1-5][0-9] | 6[0-4]) ;; *) usage ;; esac ;;
	--part) [ $# -ge 2 ] || usage; case $2 in 1 | 2 | 3) ;; *) usage ;; esac; only="$only $2"; shift ;;
	--smi-fields) smi_fields; exit $? ;;
	*) usage ;;
	esac
	shift
done
part() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
rm -rf "$out" && mkdir -p "$out" && out=$(cd "$out" && pwd)
log=$out/selfcheck.log
exec > >(tee "$log") 2>&1
label=
[ $simulated = 1 ] && label="SIMULATED "
failures=0
verdict() { # verdict NAME OK TEXT
	if [ "$2" = 1 ]; then echo "${label}SELFCHECK PASS $1: $3"; else echo "${label}SELFCHECK FAIL $1: $3"; failures=$((failures + 1)); fi
}
harness=work/build/gpuattest-harness

echo "=== ${label}gpu-check self-check, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
[ $simulated = 1 ] && echo "=== SIMULATED: nothing here runs on or says anything about a GPU"
[ $simulated = 1 ] && [ "${GPU_CHECK_EMULATED:-}" = 1 ] && echo "=== EMULATED: the bundle's binaries run under qemu-$(cat arch) on $(uname -m), on a simulated node of $simgpus GPUs"
echo "glibc: $(ldd --version 2>/dev/null | head -n1)"
if command -v nvidia-smi >/dev/null; then
	nvidia-smi -L
	nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,compute_mode,power.limit,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv
fi

# Parts 2 and 3 run the harness directly: on the GPU machine against its
# driver, simulated against the fake driver as the simulated node.
sim_env=()
ngpu=1
sizes=(--n 4194304 --gemm 1024 --rows 2048 --cols 2048)
secs=10
if [ $simulated = 1 ]; then
	uuids=$(GPUATTEST_FAKE_GPU=h100:$simgpus ./gpuattest device -o json 2>/dev/null | grep -o '"uuid": *"GPU-[0-9a-f-]*"' | grep -o 'GPU-[0-9a-f-]*' | paste -sd, -)
	sim_env=(env LD_LIBRARY_PATH="$PWD/simulated" FAKE_CUDA_DEVICES=$simgpus FAKE_CUDA_UUIDS="$uuids" FAKE_CUDA_NAME="NVIDIA H100 80GB HBM3 (SIMULATED: fake driver)")
	ngpu=$simgpus
	sizes=(--n 65536 --gemm 64 --rows 64 --cols 256)
	secs=3
	# Repeat 3 must come: under emulation 3 s gave 5 to 18 repeats.
	[ "${GPU_CHECK_EMULATED:-}" = 1 ] && secs=10
elif command -v nvidia-smi >/dev/null; then
	ngpu=$(nvidia-smi -L | grep -c '^GPU ')
fi
bad=$((ngpu > 5 ? 5 : ngpu - 1))

if part 1; then
echo
echo "=== ${label}part 1: the whole gpu-check, nvidia-smi at 2 Hz alongside"
smi_pid=
if [ $simulated = 0 ] && command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu="$(smi_fields)" --format=csv,noheader,nounits -lms 500 >"$out/nvidia-smi.csv" 2>"$out/nvidia-smi.err" &
	smi_pid=$!
else
	echo "nvidia-smi: not run (${label:-no nvidia-smi}); NVML's view comes from gpuattest's own telemetry only"
fi
if [ $simulated = 1 ]; then ./run.sh --simulated --out "$out/check-run"; else ./run.sh --out "$out/check-run"; fi
check_rc=$?
[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null && wait "$smi_pid" 2>/dev/null
verdict "gpu-check" $([ $check_rc = 0 ] && echo 1 || echo 0) "run.sh exited $check_rc"
if [ -s "$out/nvidia-smi.csv" ]; then
	# Per GPU: the best 10-sample (5 s) mean utilization, peak power against
	# the limit, peak GPU and HBM temperature, and the clock-event reasons
	# seen; against the harness's duty cycle from the burn-in results.
	echo "--- NVML (nvidia-smi, 2 Hz) per GPU: best 5 s utilization, peak power / limit, peak GPU / HBM temperature"
	awk -F', *' '{
		g = $2; n[g]++; u[g, n[g]] = $4; if ($5 + 0 > p[g]) p[g] = $5 + 0; lim[g] = $6 + 0
		if ($9 + 0 > t[g]) t[g] = $9 + 0; if ($10 + 0 > h[g]) h[g] = $10 + 0; uuid[g] = $3; r[g] = r[g] " " $11
	} END {
		for (g in n) {
			best = 0
			for (i = 10; i <= n[g]; i++) { s = 0; for (j = i - 9; j <= i; j++) s += u[g, j]; if (s / 10 > best) best = s / 10 }
			printf "NVML gpu %s %s: utilization %.0f %% (best 5 s), power %.0f of %.0f W (%.0f %%), %d C, HBM %d C\n", g, uuid[g], best, p[g], lim[g], lim[g] ? 100 * p[g] / lim[g] : 0, t[g], h[g]
		}
	}' "$out/nvidia-smi.csv" | sort -V | tee "$out/nvml-summary.txt"
	duty=$(grep -o '"duty_cycle": [0-9.e-]*' work/build/burnin-results.json 2>/dev/null | head -n1 | awk '{printf "%.1f", 100 * $2}')
	echo "harness: burn-in duty cycle ${duty:-?} % (lowest GPU; CUDA events) against NVML's utilization above"
fi
fi

if part 2; then
echo
echo "=== ${label}part 2: silent corruption (repeat 3 of sgemm corrupted on device $bad of $ngpu), must exit 1 naming the repeat and the device"
"${sim_env[@]}" "$harness" --backend cuda --fatbin-dir work/build --devices all --duration "$secs" "${sizes[@]}" \
	--inject-inconsistency "sgemm@$bad" --watchdog 60 --out "$out/corruption.json" 2>"$out/corruption.err"
rc=$?
tail -n 4 "$out/corruption.err"
uuid=$(grep -o "\"ordinal\": $bad, \"name\": \"[^\"]*\", \"uuid\": \"GPU-[0-9a-f-]*\"" "$out/corruption.json" 2>/dev/null | grep -o 'GPU-[0-9a-f-]*')
msg=$(grep -o '"message": "the output of repeat 3 differs from repeat 1[^"]*"' "$out/corruption.json" 2>/dev/null | head -n1)
ok=0
[ $rc = 1 ] && [ -n "$uuid" ] && case $msg in *"$uuid"*) ok=1 ;; esac
verdict "silent-corruption" $ok "exit $rc; ${msg:-no case names repeat 3}"
echo "--- ${label}the tensor-core burn's last pass with one mantissa bit flipped on device $bad (as a stuck multiplier bit would), must exit 1 naming the device"
"${sim_env[@]}" "$harness" --backend cuda --fatbin-dir work/build --devices all --duration "$secs" "${sizes[@]}" \
	--inject-fault "burn@$bad" --watchdog 60 --out "$out/burn-fault.json" 2>"$out/burn-fault.err"
rc=$?
tail -n 2 "$out/burn-fault.err"
msg=$(grep -o '"message": "[0-9]* of [0-9]* warps differ from the host[^"]*"' "$out/burn-fault.json" 2>/dev/null | head -n1)
ok=0
[ $rc = 1 ] && [ -n "$uuid" ] && case $msg in *"$uuid"*) ok=1 ;; esac
verdict "burn-corruption" $ok "exit $rc; ${msg:-no burn case names the warps that differ}"
fi

if part 3; then
echo
echo "=== ${label}part 3: a real illegal-address fault, then a clean run in a new process"
"${sim_env[@]}" "$harness" --backend cuda --fatbin-dir work/build --inject-illegal-address reduce_sum --repeats 2 "${sizes[@]}" --watchdog 60 --out "$out/fault.json" 2>"$out/fault.err"
rc=$?
cat "$out/fault.err"
ok=0
grep -q 'the context is lost, later cases are not run' "$out/fault.json" && grep -q '"message": "not run: context lost after' "$out/fault.json" && [ $rc = 1 ] && ok=1
verdict "illegal-address" $ok "exit $rc (want 1, the context lost, later cases not run)"
"${sim_env[@]}" "$harness" --backend cuda --fatbin-dir work/build --repeats 2 "${sizes[@]}" --watchdog 60 --out "$out/after-fault.json" 2>"$out/after-fault.err"
rc=$?
verdict "clean-after-fault" $([ $rc = 0 ] && echo 1 || echo 0) "a new process exited $rc (want 0)"
if command -v dmesg >/dev/null; then
	dmesg 2>/dev/null | grep -i 'NVRM: Xid' | tail -n 5 | sed 's/^/kernel log: /'
fi
fi

echo
echo "=== ${label}self-check: $failures part(s) failed"
gpu=$(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | tr ' ' '-' || echo simulated-h100x$simgpus)
{
	echo "# ${label}gpu-check self-check: $(date -u +%Y-%m-%d), $gpu"
	echo
	echo "What \`run.sh --selfcheck\` printed (docs/gpu-check.md#self-check says what a real run must show)."
	echo
	echo '```'
	sed 's/\x1b\[[0-9;]*m//g' "$log"
	echo '```'
} >"$out/SELFCHECK.md"
if [ "$simulated" = 1 ]; then
	# docs/gpu-runs/ holds what ran on a real GPU, never a simulated run.
	echo "wrote $out/SELFCHECK.md (SIMULATED: not a GPU run; do not commit it under docs/gpu-runs/)"
else
	echo "wrote $out/SELFCHECK.md: commit it as docs/gpu-runs/$(date -u +%Y-%m-%d)-$gpu.md"
fi
[ $failures = 0 ]
