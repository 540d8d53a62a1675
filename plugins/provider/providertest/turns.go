package providertest

import (
	"slices"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// MeasureTurns runs chat b.N times and reports the time to its first text
// delta and to its end, p50 and p99 (the providers' turn benchmarks: one
// report shape for every way a turn is run).
func MeasureTurns(b *testing.B, chat func(onEvent func(provider.Event)) error) {
	var first, full []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var tf time.Duration
		if err := chat(func(e provider.Event) {
			if tf == 0 && e.TextDelta != "" {
				tf = time.Since(t0)
			}
		}); err != nil {
			b.Fatal(err)
		}
		full = append(full, time.Since(t0))
		first = append(first, tf)
	}
	b.StopTimer()
	b.ReportMetric(float64(Percentile(first, 50).Microseconds()), "first-p50-µs")
	b.ReportMetric(float64(Percentile(first, 99).Microseconds()), "first-p99-µs")
	b.ReportMetric(float64(Percentile(full, 50).Microseconds()), "turn-p50-µs")
	b.ReportMetric(float64(Percentile(full, 99).Microseconds()), "turn-p99-µs")
}

// Percentile is the p-th percentile (nearest rank below) of ds.
func Percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
