//go:build !race

// The race detector's shadow memory multiplies a process's RSS, so the
// budget is checked only in the ordinary test pass.

package kernel

import "testing"

// TestIdleKernelMemory holds an idle kernel to the CLI budget: under
// 100 MiB resident.
func TestIdleKernelMemory(t *testing.T) {
	f := runIdleKernel(t, "cli")
	t.Logf("idle kernel: rss %.1f MiB, live heap %.1f MiB", f.rssMiB, f.heapMiB)
	if f.rssMiB >= 100 {
		t.Fatalf("idle kernel holds %.1f MiB resident, want < 100 MiB", f.rssMiB)
	}
}
