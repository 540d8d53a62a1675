package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// Row is one measured figure, with its baseline from the same run.
type Row struct {
	Suite    string  `json:"suite"`
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	N        int     `json:"n"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	P99      float64 `json:"p99"`
	Baseline string  `json:"baseline,omitempty"` // name of the row it is compared with
	Target   string  `json:"target,omitempty"`
	Verdict  string  `json:"verdict,omitempty"`
}

type suite struct {
	name string
	run  func(cfg config, progress func(string)) ([]Row, error)
}

type config struct {
	bin     string // ./bin
	samples int
}

func main() {
	out := flag.String("out", "bin/bench", "directory for results.json and results.md")
	bin := flag.String("bin", "bin", "directory holding fluffy and plugins/")
	samples := flag.Int("samples", 30, "process starts per start measurement")
	only := flag.String("only", "", "comma-separated suites to run (default all)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the harness process (the kernel runs in it) to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	cfg := config{bin: *bin, samples: *samples}
	var rows []Row
	for _, s := range suites() {
		if *only != "" && !strings.Contains(","+*only+",", ","+s.name+",") {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s\n", s.name)
		r, err := s.run(cfg, func(msg string) { fmt.Fprintf(os.Stderr, "  %s\n", msg) })
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: suite %s failed: %v\n", s.name, err)
			os.Exit(1)
		}
		rows = append(rows, r...)
	}
	if err := write(*out, rows); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(markdown(rows))
}

func suites() []suite {
	return []suite{
		{name: "plugin", run: pluginSuite},
		{name: "workspace", run: workspaceSuite},
		{name: "task", run: taskSuite},
		{name: "memory", run: memorySuite},
		{name: "parallel", run: parallelSuite},
		{name: "cli", run: cliSuite},
		{name: "flood", run: floodSuite},
	}
}

// stats turns samples into a Row (durations reported in the unit given).
func stats(suiteName, name string, ds []time.Duration, unit string) Row {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	div := map[string]float64{"ms": 1e6, "µs": 1e3, "ns": 1}[unit]
	q := func(p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		i := int(p * float64(len(ds)-1))
		return float64(ds[i].Nanoseconds()) / div
	}
	return Row{Suite: suiteName, Name: name, Unit: unit, N: len(ds), P50: q(0.50), P90: q(0.90), P99: q(0.99)}
}

func write(dir string, rows []Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"generated": time.Now().UTC().Format(time.RFC3339), "rows": rows}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(rows)), 0o644)
}

func markdown(rows []Row) string {
	var b strings.Builder
	b.WriteString("| suite | measurement | n | p50 | p90 | p99 | unit | baseline | target | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n", r.Suite, r.Name, r.N, r.P50, r.P90, r.P99, r.Unit, r.Baseline, r.Target, r.Verdict)
	}
	return b.String()
}

// verdict compares p50 against a target upper bound.
func verdict(r *Row, target float64) {
	r.Target = fmt.Sprintf("p50 < %g %s", target, r.Unit)
	if r.P50 < target {
		r.Verdict = "met"
	} else {
		r.Verdict = "MISSED"
	}
}
