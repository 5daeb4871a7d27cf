package kbench

import (
	"math"
	"slices"
	"time"
)

// Median returns the median of xs (the mean of the two middle values when
// len(xs) is even), or NaN when xs is empty. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the q-th quantile (0 < q <= 1) of sorted by the
// nearest-rank method: the smallest sample with at least q of the samples at
// or below it. sorted must be in ascending order; it returns 0 when empty.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// Latencies summarises one run's latency samples.
type Latencies struct {
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// Summarise sorts samples in place and returns their percentiles.
func Summarise(samples []time.Duration) Latencies {
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return Latencies{
		Samples: len(samples),
		P50Ms:   ms(Percentile(samples, 0.50)),
		P99Ms:   ms(Percentile(samples, 0.99)),
		P999Ms:  ms(Percentile(samples, 0.999)),
		MaxMs:   ms(Percentile(samples, 1)),
	}
}

// Ratio returns a/b, or NaN when either is not a positive number.
func Ratio(a, b float64) float64 {
	if !(a > 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.NaN()
	}
	return a / b
}
