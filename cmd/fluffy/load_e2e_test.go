package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/daemon"
)

// The load suite: many kernels on one home, a long session, a large
// repository. Each test asserts what must hold under load (every task
// finishes done, within a generous deadline, nothing deadlocks) and logs
// its figures (wall time, the kernel's peak RSS); a target for a figure
// belongs in a benchmark (`make bench`), never in these tests.

// loadDeadline is how long one loaded task may take before the test calls
// it a deadlock: far above what any of them needs on a loaded 2-core
// machine.
const loadDeadline = 4 * time.Minute

// cassetteTurn is one scripted model turn: text, then its tool calls (sent
// together, so the kernel runs them in parallel), then usage and done.
type cassetteCall struct {
	name string
	args map[string]any
}

func cassetteLine(n int, text string, calls []cassetteCall, stop string) string {
	var ev []map[string]any
	for _, w := range strings.Fields(text) {
		ev = append(ev, map[string]any{"text_delta": w + " "})
	}
	for i, c := range calls {
		id := fmt.Sprintf("t%dc%d", n, i)
		a, _ := json.Marshal(c.args)
		half := len(a) / 2
		ev = append(ev,
			map[string]any{"tool_call_start": map[string]any{"call_id": id, "name": c.name}},
			map[string]any{"tool_call_delta": map[string]any{"call_id": id, "arguments_delta": string(a[:half])}},
			map[string]any{"tool_call_delta": map[string]any{"call_id": id, "arguments_delta": string(a[half:])}},
			map[string]any{"tool_call_end": map[string]any{"call_id": id, "name": c.name, "arguments": c.args}})
	}
	ev = append(ev, map[string]any{"usage": map[string]any{"input_tokens": 900, "output_tokens": 40}},
		map[string]any{"done": map[string]any{"stop_reason": stop, "model": "replay"}})
	b, _ := json.Marshal(map[string]any{"turn": n, "events": ev})
	return string(b)
}

// loadCassette scripts the demo task (examples/cassettes/gen.py's flow:
// plan, a red test, the fix, green) with extra turns before the plan
// (explore: read-only calls) and after it (writing: the test-writing
// state's calls), each turn's calls sent together.
func loadCassette(t testing.TB, explore, writing [][]cassetteCall) string {
	t.Helper()
	var src, test string
	for _, l := range strings.Split(readFile(t, "../../examples/cassettes/parseconfig.jsonl"), "\n") {
		if l == "" {
			continue
		}
		var tr struct {
			Events []struct {
				End *struct {
					Name string         `json:"name"`
					Args map[string]any `json:"arguments"`
				} `json:"tool_call_end"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(l), &tr); err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Events {
			if e.End != nil && e.End.Name == "fs.write" {
				p, c := e.End.Args["path"].(string), e.End.Args["content"].(string)
				if strings.HasSuffix(p, "_test.go") {
					test = c
				} else {
					src = c
				}
			}
		}
	}
	if src == "" || test == "" {
		t.Fatal("the demo cassette has no fs.write of the test and the source")
	}
	var lines []string
	n := 1
	for _, calls := range explore {
		lines = append(lines, cassetteLine(n, "Looking around.", calls, "tool_use"))
		n++
	}
	lines = append(lines, cassetteLine(n, "Plan: a failing test, then the fix.", []cassetteCall{{"plan.complete", map[string]any{"plan": "1. A failing test for malformed lines.\n2. Return errors naming the line.\n3. Red, then green."}}}, "tool_use"))
	n++
	for _, calls := range writing {
		lines = append(lines, cassetteLine(n, "Preparing the tests.", calls, "tool_use"))
		n++
	}
	lines = append(lines,
		cassetteLine(n, "First the failing test.", []cassetteCall{{"fs.write", map[string]any{"path": "src/config_errors_test.go", "content": test}}, {"test.run", map[string]any{}}}, "tool_use"),
		cassetteLine(n+1, "Red as expected. Now the fix.", []cassetteCall{{"fs.write", map[string]any{"path": "src/config.go", "content": src}}, {"test.run", map[string]any{}}}, "tool_use"),
		cassetteLine(n+2, "All tests pass.", nil, "end_turn"))
	return strings.Join(lines, "\n") + "\n"
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parallelReads is one exploring turn: four read-only calls at once.
func parallelReads(pattern string) []cassetteCall {
	return []cassetteCall{
		{"fs.read", map[string]any{"path": "src/config.go"}},
		{"fs.read", map[string]any{"path": "src/config_test.go"}},
		{"fs.list", map[string]any{"path": "."}},
		{"search.grep", map[string]any{"pattern": pattern}},
	}
}

// loadRun is one task's outcome as the CLI reported it.
type loadRun struct {
	code      int
	fail      string
	stderr    string
	last      agent.Event
	results   []agent.ToolEvent
	turns     map[int]time.Time // first event of each turn
	start     time.Time
	wall      time.Duration
	kernelHWM int64  // kB, the kernel's VmHWM after the task
	log       string // the kernel's log file
	audit     string // the project's last audit records, if it failed
}

func (r loadRun) done() bool {
	return r.fail == "" && r.code == 0 && r.last.Type == agent.EventDone && r.last.Done != nil && r.last.Done.Status == agent.StatusDone
}

func (r loadRun) String() string {
	return fmt.Sprintf("exit %d %s, last event %+v (done %+v)\nstderr:\n%s", r.code, r.fail, r.last, r.last.Done, r.stderr)
}

// loadProject is demoProject with the given cassette, the long session's
// turn cap and merge size, and its kernel stopped when the test ends. It
// writes the project config itself (what `fluffy config set --project`
// writes) instead of running the CLI four times per project.
func loadProject(t testing.TB, fluffy, cassette string, env []string, extraConfig ...string) string {
	t.Helper()
	ws := t.TempDir()
	if out, err := exec.Command("cp", "-r", "../../examples/parseconfig/.", ws).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("git", "-C", ws, "init", "-q", "-b", "main").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	commitAll(t, ws, "first")
	cas := filepath.Join(ws, ".fluffy", "cassette.jsonl")
	// The long session's turns, and its merge of ~200 files without a
	// review (--yes approves only what the policy would auto-merge).
	cfg := fmt.Sprintf("provider: replay\nproviders:\n  replay:\n    cassette: %s\nagent:\n  max_turns: 400\nmerge:\n  auto_max_lines: 100000\n", cas) + strings.Join(extraConfig, "")
	if err := os.MkdirAll(filepath.Dir(cas), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cas, []byte(cassette), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".fluffy", "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, env
		_ = stop.Run()
	})
	return ws
}

// runLoadTask runs one task through the real binary (a local kernel) and
// reads the kernel's peak RSS before the kernel is stopped.
func runLoadTask(fluffy, home, ws string, env []string) loadRun {
	var r loadRun
	cmd := exec.Command(fluffy, "--json", "--yes", "--l1", "none", "add error handling to parseConfig")
	cmd.Dir, cmd.Env = ws, env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.fail = err.Error()
		return r
	}
	start := time.Now()
	r.start = start
	if err := cmd.Start(); err != nil {
		r.fail = err.Error()
		return r
	}
	timer := time.AfterFunc(loadDeadline, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	r.turns = map[int]time.Time{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			r.fail = fmt.Sprintf("stdout line is not a JSON event: %q", textsafeLine(sc.Text()))
			continue
		}
		if _, ok := r.turns[ev.Turn]; !ok && ev.Turn > 0 {
			r.turns[ev.Turn] = time.Now()
		}
		if ev.Type == agent.EventToolResult && ev.Tool != nil {
			r.results = append(r.results, *ev.Tool)
		}
		r.last = ev
	}
	err = cmd.Wait()
	r.wall = time.Since(start)
	r.stderr = stderr.String()
	if !timer.Stop() {
		r.fail = fmt.Sprintf("the task did not finish within %s (deadlock?)", loadDeadline)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		r.fail = err.Error()
	}
	r.kernelHWM = kernelHWM(home, ws)
	r.log = daemon.PathsFor(home, ws).Log
	if !r.done() {
		a := exec.Command(fluffy, "audit", "log", "--json", "--limit", "12")
		a.Dir, a.Env = ws, env
		out, _ := a.CombinedOutput()
		r.audit = string(out)
	}
	return r
}

func textsafeLine(s string) string {
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// kernelHWM is the peak resident set (VmHWM, kB) of the project's kernel
// process, found by its lock file's pid; 0 if it is not running.
func kernelHWM(home, ws string) int64 {
	pidb, err := os.ReadFile(daemon.PathsFor(home, ws).Lock)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil || pid <= 1 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}

// loadHome is a fresh home for fluffy (a layout from loadLayout) and the
// environment that selects it and the layout's runtime adapter.
func loadHome(t *testing.T, fluffy string) (home string, env []string) {
	t.Helper()
	home = shortHome(t)
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	return home, append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_RUNTIME_ADAPTER="+adapter)
}

// TestLoad is the load suite: its parts run in parallel on one fluffy
// layout (built once: the test binary's build cache is not safe for
// parallel tests), each on a home of its own.
func TestLoad(t *testing.T) {
	needDockerCLI(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("needs git")
	}
	fluffy := fluffyLayout(t, "tool-test", "tool-search", "provider-replay", "vcs-git")
	t.Run("TenProjectsOneHome", func(t *testing.T) { t.Parallel(); loadTenProjects(t, fluffy) })
	t.Run("LongSession", func(t *testing.T) { t.Parallel(); loadLongSession(t, fluffy) })
	t.Run("LargeRepository", func(t *testing.T) { t.Parallel(); loadLargeRepository(t, fluffy) })
	t.Run("Bwrap", func(t *testing.T) { t.Parallel(); loadBwrap(t, fluffy) })
}

// loadBwrap runs the ten-project task once with every plugin in a
// bubblewrap jail (sandbox: bwrap), whose /out and socket directory are
// tmpfs of their limits reached through the jail's /proc/PID/root: the
// parallel calls, the test runs (their log is in /out) and the commit
// (vcs-git's objects are in /out) all work through them.
func loadBwrap(t *testing.T, fluffy string) {
	if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv("FLUFFY_REQUIRE_JAIL") == "" {
		t.Skipf("bubblewrap is not installed: %v", err)
	}
	home, env := loadHome(t, fluffy)
	ws := loadProject(t, fluffy, loadCassette(t, [][]cassetteCall{parallelReads("parseConfig")}, nil), env, "sandbox: bwrap\n")
	r := runLoadTask(fluffy, home, ws, env)
	checkRun(t, "bwrap project", r)
	if len(r.results) < 8 {
		t.Errorf("%d tool results, want the 8 the cassette calls", len(r.results))
	}
	g := exec.Command("git", "log", "--format=%s")
	g.Dir = ws
	if log, _ := g.Output(); len(strings.Split(strings.TrimSpace(string(log)), "\n")) != 2 {
		t.Errorf("want the task's commit on top of the first:\n%s", log)
	}
	t.Logf("LOAD bwrap project: wall %.1fs; kernel VmHWM %d MiB", r.wall.Seconds(), r.kernelHWM>>10)
}

// checkRun fails t unless r finished done with every tool call ok.
func checkRun(t testing.TB, what string, r loadRun) {
	t.Helper()
	if !r.done() {
		var res []string
		for _, x := range r.results {
			res = append(res, fmt.Sprintf("%s %s ok=%v %s %s %+v", x.Name, x.Target, x.OK, x.TestStatus, x.Summary, x.Error))
		}
		log, _ := os.ReadFile(r.log)
		if len(log) > 8000 {
			log = log[len(log)-8000:]
		}
		t.Errorf("%s: %s\ntool results:\n%s\nkernel log:\n%s\naudit:\n%s", what, r, strings.Join(res, "\n"), log, r.audit)
		return
	}
	for _, res := range r.results {
		if !res.OK && res.Name != "test.run" {
			t.Errorf("%s: %s %s failed: %+v", what, res.Name, res.Target, res.Error)
		}
	}
}

// loadTenProjects runs ten tasks in ten projects on one home at
// once, each kernel a process of its own with its plugins in L2
// containers, each task's turns sending four or two tool calls together.
// Every task must finish done within the deadline.
func loadTenProjects(t *testing.T, fluffy string) {
	home, env := loadHome(t, fluffy)
	const n = 10
	cas := loadCassette(t, [][]cassetteCall{parallelReads("parseConfig")}, nil)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = loadProject(t, fluffy, cas, env)
	}
	runs := make([]loadRun, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = runLoadTask(fluffy, home, ws[i], env)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var hwm []int64
	for i, r := range runs {
		checkRun(t, fmt.Sprintf("project %d", i+1), r)
		if len(r.results) < 8 {
			t.Errorf("project %d: %d tool results, want the 8 the cassette calls", i+1, len(r.results))
		}
		hwm = append(hwm, r.kernelHWM)
	}
	slices.Sort(hwm)
	t.Logf("LOAD ten projects: wall %.1fs for all; kernel VmHWM min %d max %d MiB", wall.Seconds(), hwm[0]>>10, hwm[n-1]>>10)
}

// loadLongSession runs one task of 200 model turns (196 of them writing a
// file, every tenth with three read-only calls beside it): it must finish
// done with every call answered. The median turn time early and late and
// the kernel's peak RSS are logged, not asserted (the idle kernel's memory
// target is BenchmarkIdleKernelMemory's).
func loadLongSession(t *testing.T, fluffy string) {
	r, calls := longSession(t, fluffy)
	checkRun(t, "200-turn session", r)
	if len(r.results) != calls {
		t.Errorf("%d tool results, want the %d calls of the 200 turns", len(r.results), calls)
	}
	early, late := turnLatency(r.turns, 2, 50), turnLatency(r.turns, 150, 198)
	t.Logf("LOAD 200 turns: wall %.1fs; median turn early %v late %v; kernel VmHWM %d MiB", r.wall.Seconds(), early, late, r.kernelHWM>>10)
}

func longSession(t *testing.T, fluffy string) (loadRun, int) {
	home, env := loadHome(t, fluffy)
	// Every call differs from the ones before and every turn changes a
	// file (a model repeating a call, or a dozen turns without a change,
	// is stopped as futile): each turn writes a test file of its own;
	// every tenth turn also greps for its note's marker and reads the note
	// (two ranges), all at once.
	var writing [][]cassetteCall
	for i := range 196 {
		note := fmt.Sprintf("notes/n%03d.txt", i)
		calls := []cassetteCall{
			{"fs.write", map[string]any{"path": fmt.Sprintf("src/zz_load%03d_test.go", i), "content": fmt.Sprintf("package main\n\n// Turn %d of the long session.\n", i)}},
		}
		if i%10 == 0 {
			calls = append(calls, cassetteCall{"search.grep", map[string]any{"pattern": fmt.Sprintf("marker-%03d$", i)}},
				cassetteCall{"fs.read", map[string]any{"path": note}}, cassetteCall{"fs.read", map[string]any{"path": note, "offset": 2, "limit": 3}})
		}
		writing = append(writing, calls)
	}
	cas := loadCassette(t, nil, writing)
	if n := strings.Count(cas, "\n"); n != 200 {
		t.Fatalf("the cassette has %d turns, want 200", n)
	}
	ws := loadProject(t, fluffy, cas, env)
	if err := os.MkdirAll(filepath.Join(ws, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 196 {
		body := fmt.Sprintf("note %d\n%smarker-%03d\n", i, strings.Repeat("a line of a note about the configuration loader\n", 40), i)
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("notes/n%03d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, ws, "notes")
	return runLoadTask(fluffy, home, ws, env), strings.Count(cas, `"tool_call_end"`)
}

func commitAll(t testing.TB, ws, msg string) {
	t.Helper()
	// Uncompressed objects: zlib over the 50 MiB tree is most of its setup.
	for _, args := range [][]string{{"-c", "core.compression=0", "add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", msg}} {
		g := exec.Command("git", args...)
		g.Dir = ws
		if out, err := g.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// turnLatency is the median time between the starts of consecutive turns
// from..to.
func turnLatency(turns map[int]time.Time, from, to int) time.Duration {
	var d []time.Duration
	for i := from; i < to; i++ {
		a, okA := turns[i]
		b, okB := turns[i+1]
		if okA && okB {
			d = append(d, b.Sub(a))
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// bigRepoBytes is the size of the generated large repository.
const bigRepoBytes = 50 << 20

// loadLargeRepository runs the demo task in a 50 MiB repository (4000
// small files, three 10 MiB files) whose exploring turn lists,
// greps and reads the large files: the task finishes done and each of
// those calls returns (bounded) instead of failing or hanging.
func loadLargeRepository(t *testing.T, fluffy string) {
	r, size := largeRepo(t, fluffy)
	checkRun(t, "50 MiB repository", r)
	var names []string
	for _, res := range r.results {
		names = append(names, fmt.Sprintf("%s %s: %s (%d ms)", res.Name, res.Target, res.Summary, res.DurationMS))
	}
	var turns []string
	for i := 1; i <= len(r.turns); i++ {
		turns = append(turns, fmt.Sprintf("%d:%.1fs", i, r.turns[i].Sub(r.start).Seconds()))
	}
	t.Logf("LOAD %d MiB repository: wall %.1fs; kernel VmHWM %d MiB; turns started at %s; results:\n%s", size>>20, r.wall.Seconds(), r.kernelHWM>>10, strings.Join(turns, " "), strings.Join(names, "\n"))
}

func largeRepo(t *testing.T, fluffy string) (loadRun, int64) {
	home, env := loadHome(t, fluffy)
	cas := loadCassette(t, [][]cassetteCall{
		{
			{"fs.list", map[string]any{"path": "."}},
			{"fs.list", map[string]any{"path": "gen/d07"}},
			{"search.grep", map[string]any{"pattern": "needle"}},
			{"search.glob", map[string]any{"pattern": "**/*.txt"}},
		},
		{
			{"fs.read", map[string]any{"path": "big/blob0.txt"}},
			{"fs.read", map[string]any{"path": "big/blob1.txt"}},
			{"search.grep", map[string]any{"pattern": "line 99999"}},
			{"fs.read", map[string]any{"path": "src/config.go"}},
		},
	}, nil)
	ws := loadProject(t, fluffy, cas, env)
	size := fillRepo(t, ws)
	return runLoadTask(fluffy, home, ws, env), size
}

// fillRepo adds a 50 MiB tree to the project's repository and commits it:
// 4000 small text files in 40 directories (data, not Go packages: the
// task's test runs build the project, and 20 MiB of generated Go would
// measure the compiler), and three 10 MiB text files.
func fillRepo(t testing.TB, ws string) int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	const small = 4000
	smallBytes := (bigRepoBytes - 3*10<<20) / small
	for i := range small {
		dir := filepath.Join(ws, "gen", fmt.Sprintf("d%02d", i%40))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for b.Len() < smallBytes {
			fmt.Fprintf(&b, "record %d_%d %x %d\n", i, b.Len(), rng.Uint64(), rng.IntN(1000))
		}
		if i%500 == 0 {
			b.WriteString("// needle\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(b.Len())
	}
	if err := os.MkdirAll(filepath.Join(ws, "big"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var b strings.Builder
		for n := 0; b.Len() < 10<<20; n++ {
			fmt.Fprintf(&b, "line %d %x\n", n, rng.Uint64())
		}
		if err := os.WriteFile(filepath.Join(ws, "big", fmt.Sprintf("blob%d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(b.Len())
	}
	commitAll(t, ws, "a large tree")
	return total
}
