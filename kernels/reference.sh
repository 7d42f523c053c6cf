#!/bin/sh
# Builds the same-run reference that pipelines/ci.yaml's benchmark compares
# the working tree's kernels and harness against: kernels/ as it was at a
# base commit, taken with git archive (so uncommitted changes never leak
# into it) and built with this directory's Makefile into OUT.
#
#   kernels/reference.sh OUT [MAKE_TARGETS...]     (default: fatbins harness)
#
# The base commit is $GPUATTEST_REFERENCE when set (any commit-ish), else the
# merge-base of HEAD with main (or origin/main): on a branch that is where it
# forked, on main itself it is HEAD, so identical kernels must come out SAME.
# OUT/COMMIT records the commit; the build's log says which it was.
set -eu
out=${1:?usage: reference.sh OUT [MAKE_TARGETS...]}
shift
[ $# -gt 0 ] || set -- fatbins harness

top=$(git rev-parse --show-toplevel 2>/dev/null) || {
	echo "reference.sh: not inside a git work tree: the reference is kernels/ at a base commit" >&2
	echo "hint: run from a git clone, or set the benchmark's reference to a built release" >&2
	exit 2
}
if [ -n "${GPUATTEST_REFERENCE:-}" ]; then
	base=$(git rev-parse --verify --quiet "${GPUATTEST_REFERENCE}^{commit}") || {
		echo "reference.sh: GPUATTEST_REFERENCE=$GPUATTEST_REFERENCE is not a commit in this clone" >&2
		exit 2
	}
	why="GPUATTEST_REFERENCE"
else
	base=""
	for b in main origin/main; do
		if base=$(git merge-base HEAD "$b" 2>/dev/null); then
			why="merge-base of HEAD and $b"
			break
		fi
	done
	if [ -z "$base" ]; then
		base=$(git rev-parse HEAD)
		why="HEAD (no main or origin/main to fork from)"
	fi
fi
echo "reference.sh: reference is kernels/ at $base ($why)"

mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# A fresh build directory: git archive gives files the commit's time, so
# make would take anything already in OUT for up to date.
git -C "$top" archive "$base" kernels | tar -x -C "$tmp"
make -s -C "$tmp/kernels" BUILD="$tmp/build" "$@"
echo "$base" >"$tmp/build/COMMIT"
cp "$tmp"/build/* "$out"/
