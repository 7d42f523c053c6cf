#!/usr/bin/env bash
# The GPU check, run from the bundle make gpu-check-bundle writes, on a GPU
# machine that has only the bundle (no package registry, no CUDA toolkit;
# the NVIDIA driver and libcuda are the machine's own).
#
#   ./run.sh [--simulated] [--out DIR]
#   ./run.sh --selfcheck [--simulated] [--out DIR]   (selfcheck.sh: run it first
#                                                    on any GPU machine)
#
# A bundle runs only on the architecture it was built for (its arch file):
# see below.
#
# DIR (default check-run, beside run/) receives a copy of run/ and the
# resumed run; run/ itself stays as built. DIR is replaced, so it may not
# be the bundle, a directory holding it, or one of the bundle's own files
# (run/, work/, the binaries, this script) or anything inside them.
# It prints the device record (gpuattest device), resumes the bundle's run
# of work/gpu-check.yaml (host runner, release: true) so that its gpu: true
# steps run here on the cuda backend (validate, benchmark, a 2-minute
# sustained burn-in), signs the attestations with a fresh key, verifies
# them with the default policy, and prints one table (bench/gpucheck).
#
# --simulated runs the same on a machine without a GPU, as the simulated
# 8-GPU HGX H100 node: GPUATTEST_FAKE_GPU=h100:8 (go-nvml's mock server)
# for the device record, preflight and telemetry, and the harness's cuda
# backend on the bundle's fake driver (simulated/libcuda.so.1: kernels run
# on the host, one fake device per simulated GPU, with its UUID, 160 MiB
# of memory each) with small sizes. Everything it prints says SIMULATED;
# the default policy refuses its attestation (hardware not simulated), as
# it must, and a second verification without that rule shows the
# signature and the other rules.
set -euo pipefail
cd "$(dirname "$0")"
# The bundle runs on the machine it was built for (arch, as uname -m says
# it: x86_64 from make gpu-check-bundle, aarch64 from make
# gpu-check-bundle-arm64); another is refused, naming both, before anything
# runs. GPU_CHECK_QEMU=1 runs a bundle of another architecture under
# qemu-user (binfmt_misc with qemu-ARCH registered: its gpuattest must
# start), --simulated only: how CI checks the arm64 bundle on x86_64 (make
# gpu-selfcheck-arm64).
machine=$(uname -m)
arch=$(cat arch 2>/dev/null || true)
emulated=0
if [ "$arch" != "$machine" ]; then
	if [ -z "$arch" ]; then
		echo "run.sh: this bundle records no architecture (no arch file beside run.sh), this machine is $machine" >&2
		echo "hint: rebuild the bundle: make gpu-check-bundle (x86_64) or make gpu-check-bundle-arm64 (aarch64)" >&2
		exit 3
	fi
	case " $* " in *" --simulated "*) sim=1 ;; *) sim=0 ;; esac
	if [ "${GPU_CHECK_QEMU:-}" != 1 ] || [ $sim = 0 ] || ! ./gpuattest version >/dev/null 2>&1; then
		echo "run.sh: this bundle is for $arch, this machine is $machine" >&2
		echo "hint: carry the bundle built for $machine (make gpu-check-bundle for x86_64, make gpu-check-bundle-arm64 for aarch64); GPU_CHECK_QEMU=1 runs it --simulated under qemu-$arch where binfmt_misc has it" >&2
		exit 3
	fi
	echo "=== EMULATED: this bundle is for $arch, this machine is $machine: its binaries run under qemu-$arch (GPU_CHECK_QEMU=1), SIMULATED only, on a smaller simulated node (2 GPUs of 32 MiB: the fake driver's kernels run on the emulated CPU) ==="
	# selfcheck.sh sizes its parts for emulation too.
	emulated=1
	export GPU_CHECK_EMULATED=1
fi
if [ "${1:-}" = --selfcheck ]; then
	shift
	exec ./selfcheck.sh "$@"
fi
simulated=0 out=
while [ $# -gt 0 ]; do
	case $1 in
	--simulated) simulated=1 ;;
	--out)
		[ $# -ge 2 ] || { echo "usage: run.sh [--simulated] [--out DIR]" >&2; exit 2; }
		out=$2
		shift
		;;
	*) echo "usage: run.sh [--simulated] [--out DIR]" >&2; exit 2 ;;
	esac
	shift
done
[ -f run/run.json ] || { echo "run.sh: no run/ here: run it from the bundle make gpu-check-bundle writes" >&2; exit 2; }
out=${out:-check-run}
# DIR is removed and replaced: refuse one that would take the bundle
# with it, before anything is touched.
bundle=$(pwd -P)
abs=$(realpath -m -- "$out")
refuse() {
	echo "run.sh: --out $out ($abs) $1, which --out would delete" >&2
	echo "hint: give a new directory, e.g. --out check-run (the default) or one outside the bundle" >&2
	exit 2
}
trimmed=${abs%/} # "" for /
case "$bundle/" in "$trimmed"/*) refuse "is the bundle or holds it" ;; esac
for own in run work gpuattest gpucheck run.sh; do
	case "$abs/" in "$bundle/$own"/*) refuse "is the bundle's own $own or inside it" ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out" && cp -r run "$out" # the bundle's run stays as built, for another try

export GPU_CHECK_BACKEND=cuda
unset GPU_CHECK_SIZES
if [ $simulated = 1 ]; then
	# The simulated node: 8 H100s whose fake driver gives each 160 MiB;
	# under emulation (above) 2 of 32 MiB, so that the whole check, its
	# 2-minute burn-in included, keeps up on the emulated CPU (the
	# fake's kernels and memory sweep run there, 8 devices' worth did 0
	# burn-in rounds in 2 minutes).
	simgpus=8 simmem=$((160 << 20))
	if [ $emulated = 1 ]; then simgpus=2 simmem=$((32 << 20)); fi
	echo "=== SIMULATED GPU CHECK: the simulated $simgpus-GPU node (GPUATTEST_FAKE_GPU=h100:$simgpus) and the fake CUDA driver (kernels run on the host); nothing runs on a GPU ==="
	[ -f simulated/libcuda.so.1 ] || { echo "run.sh: no simulated/libcuda.so.1 in this bundle: rebuild it with make gpu-check-bundle" >&2; exit 2; }
	export GPUATTEST_FAKE_GPU=h100:$simgpus GPU_CHECK_BACKEND=cuda
	export GPU_CHECK_SIZES="--n 262144 --gemm 128 --rows 256 --cols 512 --membw-bytes 4194304"
	uuids=$(./gpuattest device -o json 2>/dev/null | grep -o '"uuid": *"GPU-[0-9a-f-]*"' | grep -o 'GPU-[0-9a-f-]*' | paste -sd, -)
	export LD_LIBRARY_PATH="$PWD/simulated${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKE_CUDA_DEVICES=$simgpus FAKE_CUDA_UUIDS="$uuids"
	export FAKE_CUDA_NAME="NVIDIA H100 80GB HBM3 (SIMULATED: fake driver)" FAKE_CUDA_MEMORY=$simmem
	# As on a box without libnvidia-ptxjitcompiler: the simulated H100s
	# (9.0) must run on the harness's sm_90 cubins.
	export FAKE_CUDA_NO_JIT=1
fi

if [ $simulated = 0 ]; then
	# The driver's libraries first: without libcuda or NVML nothing runs.
	# The PTX JIT is needed only on a GPU for which the harness ships no
	# cubin of its own kernels (sm_80 and sm_90 cubins run on compute
	# capability 8.x and 9.0): there the burn-in would fail with error 221
	# while validate passes.
	for lib in libcuda.so.1 libnvidia-ml.so.1; do
		if ! (ldconfig -p 2>/dev/null || true) | grep -F "$lib" >/dev/null; then
			echo "run.sh: $lib not found (ldconfig -p): the NVIDIA driver's user-space libraries are missing" >&2
			echo "hint: install the driver's libraries (nvidia-utils / libnvidia-compute of the driver's version), or set LD_LIBRARY_PATH" >&2
			exit 3
		fi
	done
	if ! (ldconfig -p 2>/dev/null || true) | grep -F libnvidia-ptxjitcompiler.so.1 >/dev/null; then
		echo "run.sh: warning: libnvidia-ptxjitcompiler.so.1 not found (ldconfig -p): fine on compute capability 8.x and 9.0 (the harness ships cubins for sm_80 and sm_90), but on any other GPU the burn-in's kernels need the PTX JIT and fail with error 221" >&2
		echo "hint: install the driver's libnvidia-compute package if a GPU here is not 8.x or 9.0" >&2
	fi
fi
# Neither probe may end the script: ldd is cut short by head (SIGPIPE
# under pipefail), and a bundle without glibc-floor has no floor to check.
have=$( (ldd --version 2>/dev/null || true) | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')
need=$(sed 's/GLIBC_//' glibc-floor 2>/dev/null || true) # written when the bundle was built
if [ -n "$have" ] && [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
	echo "run.sh: this machine has glibc $have; the bundle needs $need or newer (it was built on a newer system)" >&2
	echo "hint: build the bundle on a system with glibc <= $have (make gpu-check-bundle), or run on a newer OS" >&2
	exit 3
fi
# The bundle's binaries link libstdc++ and libgcc statically: glibcxx-floor
# says "none". A bundle that needs this machine's libstdc++ is refused.
cxx=$(cat glibcxx-floor 2>/dev/null || echo unknown)
if [ "$cxx" != none ]; then
	echo "run.sh: the bundle's glibcxx-floor is '$cxx', expected 'none' (its binaries would need this machine's libstdc++)" >&2
	echo "hint: rebuild the bundle with make gpu-check-bundle (it links libstdc++ statically and checks every binary)" >&2
	exit 3
fi

echo "=== gpuattest device"
./gpuattest version
./gpuattest device

echo "=== gpuattest run --resume (the gpu: true steps, backend $GPU_CHECK_BACKEND)"
GPUATTEST_PASSWORD= ./gpuattest key generate --output-key-prefix "$tmp/key" --no-password >/dev/null
set +e
./gpuattest run work/gpu-check.yaml --resume "$out" --key "$tmp/key.key"
run_rc=$?
set -e

verify() {
	local rc=0
	./gpuattest verify --bundle "$out/attestations.intoto.jsonl" --key "$tmp/key.pub" "$@" work/build/*.fatbin >"$tmp/verify.out" 2>&1 || rc=$?
	cat "$tmp/verify.out" >&2
	# The last line says the outcome; FAIL lines, one per line after it,
	# say which check failed.
	echo "exit $rc: $(tail -n1 "$tmp/verify.out")"
	grep '^FAIL' "$tmp/verify.out" | sed 's/  */ /g; s/^/  /' || true
}
# The default policy asks for every pinned target (sm_80 and sm_90) on a
# GPU of its compute capability, which one node of one model cannot give:
# the check also verifies against this node's own target, and says which.
cc=$(./gpuattest device -o json 2>/dev/null | grep -o '"compute_capability": *"[0-9.]*"' | head -n1 | grep -o '[0-9]*\.[0-9]*')
real='!predicate.simulated'
devreal='s.devices.all(d, !d.simulated)'
if [ $simulated = 1 ]; then real=true devreal=true; fi
cat >"$tmp/local.yaml" <<POLICY
apiVersion: gpuattest.dev/v1
kind: Policy
rules:
  - name: all steps passed
    expr: predicate.result == "passed" && size(predicate.failed_steps) == 0 && predicate.steps.all(s, s.verdict in ["passed", "cached"])
    message: every step of the run must have passed
  - name: hardware not simulated
    expr: $real
    message: the run must have used real GPUs
  - name: this node's target sm_${cc/./} covered (cc ${cc:-?})
    expr: predicate.steps.exists(s, s.kind in ["test", "benchmark", "burnin"] && s.verdict == "passed" && has(s.backend) && s.backend == "cuda" && size(s.devices) > 0 && $devreal && s.devices.all(d, d.compute_capability == "${cc:-none}"))
    message: a passed test, benchmark or burn-in must have run with backend cuda on this node's GPUs (compute capability ${cc:-?})
POLICY
verdicts=
if [ -f "$out/attestations.intoto.jsonl" ]; then
	echo "=== gpuattest verify (default policy: every pinned target, sm_80 and sm_90, on a GPU of its capability; one model cannot cover both)"
	verdicts="default policy: $(verify)"
	echo "=== gpuattest verify (this node's target only: cc ${cc:-?}, sm_${cc/./})"
	verdicts="$verdicts
this node's target (cc ${cc:-?} -> sm_${cc/./}; the other pinned targets need a GPU of their own capability): $(verify --policy "$tmp/local.yaml")"
	if [ $simulated = 1 ]; then
		cat >"$tmp/policy.yaml" <<'POLICY'
apiVersion: gpuattest.dev/v1
kind: Policy
rules:
  - name: all steps passed
    expr: predicate.result == "passed" && size(predicate.failed_steps) == 0 && predicate.steps.all(s, s.verdict in ["passed", "cached"])
    message: every step of the run must have passed
POLICY
		echo "=== gpuattest verify (the default policy without its 'hardware not simulated' rule)"
		verdicts="$verdicts
without the not-simulated rule: $(verify --policy "$tmp/policy.yaml")"
	fi
else
	verdicts="no attestation: gpuattest run exited $run_rc"
fi

echo "=== GPU check"
./gpucheck -verify "$verdicts" "$out"
exit $run_rc
