package kernel

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
)

// idleChildEnv selects the child mode of the test binary: the value is
// "cli" (fluffy's badger sizes) or "defaults" (badger's own).
const idleChildEnv = "FLUFFY_IDLE_KERNEL_CHILD"

// idleFigures is what one idle kernel measured of itself.
type idleFigures struct{ rssMiB, heapMiB, anonMiB, fileMiB float64 }

// runIdleKernel starts this test binary as a child that opens a real kernel
// on a fresh project, records audit events, idles, and prints its RSS and
// live heap: a process of its own, so that neither variant inherits the
// other's memory.
func runIdleKernel(tb testing.TB, variant string) idleFigures {
	tb.Helper()
	home, ws := tb.TempDir(), tb.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/x\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	// A project with history (an earlier kernel's sessions), then the
	// kernel measured, each in a process of its own so that neither
	// variant nor phase inherits another's memory.
	idleChild(tb, variant, "seed", home, ws)
	out := idleChild(tb, variant, "measure", home, ws)
	var f idleFigures
	sc := bufio.NewScanner(strings.NewReader(out))
	found := false
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "IDLE rss_mib=%f heap_mib=%f anon_mib=%f file_mib=%f", &f.rssMiB, &f.heapMiB, &f.anonMiB, &f.fileMiB); err == nil {
			found = true
		}
	}
	if !found {
		tb.Fatalf("idle kernel (%s) printed no figures:\n%s", variant, out)
	}
	return f
}

func idleChild(tb testing.TB, variant, phase, home, ws string) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleKernelChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), idleChildEnv+"="+variant, idleChildEnv+"_PHASE="+phase,
		idleChildEnv+"_HOME="+home, idleChildEnv+"_WS="+ws)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("idle kernel (%s, %s): %v\n%s", variant, phase, err, out)
	}
	return string(out)
}

// BenchmarkIdleKernelMemory reports the RSS and live heap of an idle kernel
// with its databases open, with fluffy's badger sizes and, as the baseline
// in the same run, with badger's defaults.
func BenchmarkIdleKernelMemory(b *testing.B) {
	var cli, def idleFigures
	for i := 0; i < b.N; i++ {
		cli = runIdleKernel(b, "cli")
		def = runIdleKernel(b, "defaults")
	}
	b.ReportMetric(cli.rssMiB, "rss-MiB")
	b.ReportMetric(cli.heapMiB, "heap-MiB")
	b.ReportMetric(cli.fileMiB, "rss-file-MiB")
	b.ReportMetric(def.rssMiB, "baseline-rss-MiB")
	b.ReportMetric(def.fileMiB, "baseline-rss-file-MiB")
	b.ReportMetric(def.heapMiB, "baseline-heap-MiB")
}

// TestIdleKernelChild is the child of runIdleKernel; it does nothing in a
// normal test run.
func TestIdleKernelChild(t *testing.T) {
	variant := os.Getenv(idleChildEnv)
	if variant == "" {
		return
	}
	ctx := context.Background()
	home, ws := os.Getenv(idleChildEnv+"_HOME"), os.Getenv(idleChildEnv+"_WS")
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, BadgerDefaults: variant == "defaults"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	// History as sessions leave it: tool calls with their summaries.
	n := 10000
	if os.Getenv(idleChildEnv+"_PHASE") == "seed" {
		n = 40000
	}
	input := strings.Repeat("read main.go and the tests beside it; ", 25)
	for i := 0; i < n; i++ {
		ev := audit.Event{Type: audit.EventToolExecute, ToolName: "read_file", SessionID: "s1", Input: input + strconv.Itoa(i)}
		if _, err := k.Audit.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Audit.Flush(); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(idleChildEnv+"_PHASE") == "seed" {
		return
	}
	// Idle: the home database's linger ends, background work settles.
	time.Sleep(3 * time.Second)
	rss := procStatus(t, "VmRSS:")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("IDLE rss_mib=%.1f heap_mib=%.1f anon_mib=%.1f file_mib=%.1f heapsys_mib=%.1f released_mib=%.1f\n", rss, float64(ms.HeapAlloc)/(1<<20),
		procStatus(t, "RssAnon:"), procStatus(t, "RssFile:"), float64(ms.HeapSys)/(1<<20), float64(ms.HeapReleased)/(1<<20))
}

// procStatus is one of this process's memory figures in /proc/self/status
// (VmRSS:, RssAnon:, RssFile:), in MiB.
func procStatus(t *testing.T, field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
