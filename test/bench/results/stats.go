package results

import (
	"math"
	"slices"
)

// Median is the 50th percentile of xs (0 for none).
func Median(xs []float64) float64 { return Percentile(xs, 50) }

// Percentile is the p-th percentile of xs by the nearest-rank method: with
// few samples a high percentile is the largest one, never an
// interpolation between samples that did not happen.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Summarize is the p50 and p99 of samples.
func Summarize(samples []float64) Latency {
	return Latency{P50: Percentile(samples, 50), P99: Percentile(samples, 99), Samples: len(samples)}
}
