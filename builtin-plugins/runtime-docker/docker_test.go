package main

import "testing"

// TestCPUQuota: a CPU limit keeps its share but is enforced over 10 ms
// CFS periods, not Docker's 100 ms default (NanoCPUs), so a throttled
// plugin stalls for a few ms, not up to 50 ms.
func TestCPUQuota(t *testing.T) {
	for _, tc := range []struct {
		nano          int64
		period, quota int64
	}{
		{0, 0, 0},
		{-1, 0, 0},
		{500_000_000, 10_000, 5_000},    // ai-provider: 0.5 CPU
		{250_000_000, 10_000, 2_500},    // policy-sandbox: 0.25 CPU
		{1_000_000_000, 10_000, 10_000}, // 1 CPU
		{2_000_000_000, 10_000, 20_000}, // 2 CPUs
		{50_000_000, 20_000, 1_000},     // 0.05 CPU: the kernel's 1 ms minimum quota, a longer period
		{500_000, 1_000_000, 1_000},     // the kernel's 1 s maximum period
	} {
		p, q := cpuQuota(tc.nano)
		if p != tc.period || q != tc.quota {
			t.Errorf("cpuQuota(%d) = %d, %d; want %d, %d", tc.nano, p, q, tc.period, tc.quota)
		}
	}
}
