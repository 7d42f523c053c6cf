// Package floors holds gpuattest's floors per GPU model: what a GPU of a
// known model must reach in a burn-in and a benchmark for "passed" to
// mean the GPU is healthy, not merely that the kernels ran. Each floor
// carries its unit in its type and the published peak it is a share of,
// with the source of that peak, so that a floor typed in the wrong unit
// (DCGM 4.6.0's H200 memory-bandwidth floor of 2333 beside H100's
// 1,905,000, in MB/s: a floor that cannot fail) is caught by a test
// that checks every floor against its peak. A model not in the table has
// no floor: it is not judged, and says so (NotJudged), and a pipeline
// that sets preflight.requireFloors fails on it.
package floors
