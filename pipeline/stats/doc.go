// Package stats holds the distribution-free statistics behind gpuattest's
// benchmark summaries and regression gate: quantiles, an order-statistic
// confidence interval of the median, the Mann-Whitney U test (exact for
// small untied samples, normal approximation with tie correction
// otherwise), a Hodges-Lehmann estimate of the relative shift between two
// timing samples with its confidence interval, and the SAME / FASTER /
// SLOWER / AMBIGUOUS verdict built from them.
//
// Timings are positive durations; shifts are computed on their logarithms
// so that a delta of 0.05 means "5 % slower", whatever the scale.
package stats
