// Command stats measures gpuattest's regression gate on simulated GPU-like
// timing noise: lognormal samples with a coefficient of variation of 1-5 %
// and rare throttle outliers (a sample 1.2-2x slower). For each noise level
// and sample size it prints the false-positive rate (SLOWER reported with
// no true change) and the power (SLOWER reported for a true 5 % slowdown)
// of the gate in pipeline/stats and of a naive "mean slower by more
// than 3 %" gate.
//
//	go run ./bench/stats [-trials 2000] [-seed 1]
//
// The goal: false positives ≤ 1 % with no true change and power ≥ 95 % for
// a true 5 % slowdown at CV 2 %, with at most 50 samples a side.
package main
