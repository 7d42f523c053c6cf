// Package cudaimage builds, caches and serves a CUDA build image for tests.
//
// Nothing can be pulled from public registries on the machines the tests
// run on, so the image is assembled here: a minimal Debian bookworm root
// file system made by debootstrap (with g++-11, nvcc 11.8's newest
// supported host compiler) plus the files of this machine's installed
// Debian CUDA toolkit packages (nvcc, cicc, ptxas, fatbinary, headers),
// without the math libraries and their static archives. The result is one
// gzip layer in a go-containerregistry v1.Image, cached as an OCI layout
// under $GPUATTEST_TEST_CACHE (default /var/cache/gpuattest-test) keyed by
// a hash of the recipe and the host package versions. A lock file keeps
// parallel test binaries from building it twice.
//
// Ensure returns the cached image (building it on first use); Push puts
// it into a registry on 127.0.0.1 and returns name@sha256:... ; StartRegistry
// starts an in-process registry for that. Build is the same without a
// testing.TB, for the .ci/cudaimage helper.
package cudaimage
