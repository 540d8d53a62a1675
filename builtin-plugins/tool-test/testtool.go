package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
	"github.com/fluffy-waffle/fluffy/pluginsdk/toolpath"
)

const (
	summaryRun = "Run the project's tests in the sandbox; returns red|green|no_tests|build_error|timeout|runner_error with per-test results and build errors (file:line)"
	schemaRun  = `{"type":"object","properties":{"path":{"type":"string","maxLength":4096,"description":"Directory whose tests to run, relative to the project root, optionally ending in /... for everything below it (absent: the whole project)"},"runner":{"type":"string","enum":["go","pytest","node","cargo"],"description":"Test runner to use (absent: detected from the project's files)"},"timeout_seconds":{"type":"integer","minimum":1,"maximum":300,"description":"Seconds before the run is stopped and reported as timeout (default 300, at most 300)"},"coverage":{"type":"boolean","description":"Also report line coverage (runners that support it)"}},"additionalProperties":false}`

	defaultTimeout = 300 * time.Second
	// deadlineMargin is kept between the run's own deadline and the
	// call's, so a slow run is reported as a timeout, not lost.
	deadlineMargin = 5 * time.Second
	// maxMessageBytes bounds one test's failure output.
	maxMessageBytes = 2 << 10
	// maxMessagesBytes bounds all failure messages of one result together.
	maxMessagesBytes = 256 << 10
	// maxPassingListed bounds how many passing tests are listed one by
	// one (failures and skips always are; Counts are always exact).
	maxPassingListed = 1000
	// logName is the full log's name in /out/<operation>/.
	logName = "test-run.log"
	// maxLogBytes bounds the full log.
	maxLogBytes = 64 << 20
)

func newToolSet(logger hclog.Logger) *pluginsdk.ToolSet {
	return &pluginsdk.ToolSet{
		Name:    "tool-test",
		Version: version,
		Logger:  logger,
		Specs: []pluginsdk.ToolSpec{
			{Def: tool.Def{Name: "test.run", Summary: summaryRun, Parameters: json.RawMessage(schemaRun), OutputMode: tool.OutputFull}, Handler: runTests},
		},
	}
}

type runArgs struct {
	Path           string `json:"path"`
	Runner         string `json:"runner"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	Coverage       bool   `json:"coverage"`
}

// job is one run being prepared and executed.
type job struct {
	ws      string // the read-only workspace root
	target  string // cleaned project-relative path the call named, "." by default
	pattern string // the package pattern suffix ("/..." or "")
	args    runArgs
	scratch string // per-run scratch directory (deleted after the run)
	self    string // this binary, for the confine launcher
	cache   string // build cache for the toolchain, "" for a cold build
	log     *capBuffer
	logger  hclog.Logger
}

func runTests(ctx context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a runArgs
	if err := pluginsdk.DecodeArgs("test.run", raw, &a); err != nil {
		return nil, err
	}
	if a.TimeoutSeconds < 0 || a.TimeoutSeconds > 300 {
		return nil, uerr.New("TOOL_ARGS_INVALID", fmt.Sprintf("timeout_seconds %d is out of range", a.TimeoutSeconds), "a run may last 1 to 300 seconds (the sandbox's call deadline)", "omit timeout_seconds for the default of 300")
	}
	if tc.Workspace == "" {
		return nil, uerr.New("TEST_NOT_CONFIGURED", "tool-test has no workspace", "the kernel did not send a workspace in Configure", "this is a kernel bug; report it")
	}
	target, pattern, err := splitPattern(a.Path)
	if err != nil {
		return nil, err
	}
	root, err := toolpath.OpenRoot("tool-test", tc.Workspace)
	if err != nil {
		return nil, err
	}
	st, err := root.Lstat(target)
	if err != nil {
		root.Close()
		return nil, toolpath.Err(target, err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		root.Close()
		return nil, uerr.New("TEST_BAD_PATH", fmt.Sprintf("%s is a symbolic link", target), "test.run does not follow links out of the path it is given", "name the link's target instead")
	}
	runner := a.Runner
	if runner == "" {
		runner = detectRunner(root, target)
	}
	root.Close()
	if runner == "" {
		return nil, uerr.New("TEST_NO_RUNNER", "no test runner found for "+target,
			"none of go.mod, pyproject.toml, pytest.ini, setup.cfg, conftest.py, test_*.py, package.json or Cargo.toml is in the project root or that directory",
			`name the runner: {"runner":"go"} (or pytest, node, cargo)`)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locate own binary: %w", err)
	}
	scratch, err := os.MkdirTemp("", "fluffy-test-")
	if err != nil {
		return nil, fmt.Errorf("scratch dir: %w", err)
	}
	defer os.RemoveAll(scratch)
	_ = os.Chmod(scratch, 0o755)

	timeout := defaultTimeout
	if a.TimeoutSeconds > 0 {
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - deadlineMargin; left < timeout {
			timeout = max(left, time.Second)
		}
	}
	j := &job{ws: tc.Workspace, target: target, pattern: pattern, args: a, scratch: scratch, self: self,
		cache: buildCache(), log: &capBuffer{max: maxLogBytes}, logger: tc.Logger}
	start := time.Now()
	oomBefore, oomKnown := oomKills(cgroupDir)
	var run testrun.Run
	switch runner {
	case "go":
		run = j.runGo(ctx, timeout)
	case "pytest":
		run = j.runPytest(ctx, timeout)
	case "node":
		run = j.runNode(ctx, timeout)
	case "cargo":
		run = j.runCargo(ctx, timeout)
	}
	run.Runner = runner
	if oomAfter, ok := oomKills(cgroupDir); oomKnown && ok {
		markOOM(&run, oomBefore, oomAfter, memoryLimit(cgroupDir))
	}
	if a.Coverage && run.Coverage == nil && !coverageRunners[runner] {
		// Said, not silently dropped: the caller asked for coverage.
		run.Summary = strings.TrimSpace(run.Summary + " (coverage is not measured for " + runner + ": only go and node report it)")
	}
	run.DurationMS = time.Since(start).Milliseconds()
	finish(&run)
	if lf, err := writeLog(tc, j.log.Bytes()); err != nil {
		tc.Logger.Warn("could not write the full log", "error", err)
	} else {
		run.LogFile = lf
	}
	return run, nil
}

// splitPattern turns the path argument into a project-relative directory
// and a recursive suffix: "" and "./..." are the whole project, "pkg/..."
// is pkg and below, "pkg" is pkg alone.
func splitPattern(p string) (dir, suffix string, err error) {
	if p == "" || p == "./..." || p == "..." {
		return ".", "/...", nil
	}
	q := strings.TrimPrefix(p, "./")
	if rest, ok := strings.CutSuffix(q, "/..."); ok {
		q, suffix = rest, "/..."
	}
	if strings.Contains(q, "...") {
		return "", "", uerr.New("TEST_BAD_PATH", fmt.Sprintf("%q is not a supported pattern", p), "test.run takes a directory, optionally followed by /...", `use "pkg/..." for a directory and everything below it, or "pkg" for one directory`)
	}
	dir, err = toolpath.Clean(q)
	if err != nil {
		return "", "", err
	}
	return dir, suffix, nil
}

// buildCache is the kernel-owned build cache, used only when Landlock can
// keep the code the run executes from writing it.
func buildCache() string {
	c := os.Getenv("FLUFFY_BUILD_CACHE")
	if c == "" || !filepath.IsAbs(c) || landlock.ABI() == 0 {
		return ""
	}
	return c
}

// finish fills the counts-derived fields every runner shares and bounds
// the text.
func finish(r *testrun.Run) {
	var failed, skipped, passed []testrun.Test
	r.Counts = testrun.Counts{}
	for _, t := range r.Tests {
		switch t.Status {
		case testrun.Fail:
			r.Counts.Failed++
			failed = append(failed, t)
		case testrun.Skip:
			r.Counts.Skipped++
			skipped = append(skipped, t)
		default:
			r.Counts.Passed++
			passed = append(passed, t)
		}
	}
	if len(passed) > maxPassingListed {
		passed = passed[:maxPassingListed]
	}
	r.Tests = append(append(failed, skipped...), passed...)
	if len(r.Tests) > testrun.MaxTests {
		r.Tests = r.Tests[:testrun.MaxTests]
	}
	// Messages share one budget, so the whole result stays well under the
	// router's output limit however many tests fail; the log has them all.
	budget := maxMessagesBytes
	for i := range r.Tests {
		m := r.Tests[i].Message
		if len(m) > budget {
			m = ""
			if budget > 0 {
				m = tailClip(r.Tests[i].Message, budget)
			}
		}
		budget -= len(m)
		r.Tests[i].Message = m
	}
	if len(r.BuildErrors) > testrun.MaxBuildErrors {
		r.BuildErrors = r.BuildErrors[:testrun.MaxBuildErrors]
	}
	// A run that ended green without a passing test has nothing to show.
	if r.Status == testrun.Green && r.Counts.Passed == 0 {
		r.Status = testrun.NoTests
	}
	if r.Status == testrun.Green && r.Counts.Failed > 0 {
		r.Status = testrun.Red
	}
	head := fmt.Sprintf("%s: %d passed, %d failed, %d skipped", r.Status, r.Counts.Passed, r.Counts.Failed, r.Counts.Skipped)
	if len(r.BuildErrors) > 0 {
		be := r.BuildErrors[0]
		head += fmt.Sprintf("; %d build error(s), first %s:%d: %s", len(r.BuildErrors), be.File, be.Line, be.Message)
	}
	if r.Status == testrun.Red && len(r.BuildErrors) > 0 {
		head += "\nthe build failed in " + textsafe.Cap(strings.Join(failedPackages(r.BuildErrors), ", "), 512) + " (the code or the tests do not compile or import yet): every error is listed in build_errors"
	}
	if r.Summary != "" {
		head += "\n" + r.Summary
	}
	r.Summary = textsafe.Cap(head, 2<<10)
	r.Output = headTail(r.Output, testrun.MaxTextBytes-len(r.Summary)-1024)
}

// writeLog puts the full log in /out/<operation>/test-run.log and returns
// its path relative to /out/<operation>/.
func writeLog(tc *pluginsdk.ToolContext, b []byte) (string, error) {
	if tc.OutDir == "" || len(b) == 0 {
		return "", nil
	}
	op := tc.Call.OperationID
	if op == "" {
		op = tc.Call.ID
	}
	if confine.Name(op) != nil {
		return "", fmt.Errorf("operation id %q is not a directory name", op)
	}
	dir := filepath.Join(tc.OutDir, op)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, logName), b, 0o644); err != nil {
		return "", err
	}
	return logName, nil
}

// command is one runner process: its stdout is parsed, stdout and stderr
// both go to the log.
type command struct {
	argv    []string
	dir     string
	env     []string
	timeout time.Duration
}

type cmdResult struct {
	stdout   []byte
	exitCode int
	state    string // how the process ended ("exit status 2", "signal: killed")
	timedOut bool
	err      error // could not start, or killed for another reason
}

// execute runs c in its own process group, killed whole at the timeout.
// Stdout is returned (bounded) and both streams are appended to the log.
func (j *job) execute(ctx context.Context, c command, stdout *capBuffer) cmdResult {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.Stdout = stdout
	cmd.Stderr = j.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(j.log, "$ %s\n", strings.Join(c.argv, " "))
	if err := cmd.Start(); err != nil {
		return cmdResult{err: err, exitCode: -1}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	var timedOut bool
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	// Whatever the test left behind in its group goes too.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res := cmdResult{stdout: stdout.Bytes(), timedOut: timedOut}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.exitCode, res.state = ee.ExitCode(), ee.ProcessState.String()
	default:
		res.err, res.exitCode = err, -1
	}
	if !timedOut && ctx.Err() != nil {
		res.err = context.Cause(ctx)
	}
	return res
}

// baseEnv is the environment every runner starts from: the sandbox's PATH
// and toolchain variables, nothing of the plugin protocol.
func (j *job) baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PLUGIN_") || strings.HasPrefix(k, "FLUFFY_") || k == "TMPDIR" || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(j.scratch, "home")
	tmp := filepath.Join(j.scratch, "tmp")
	_ = os.MkdirAll(home, 0o755)
	_ = os.MkdirAll(tmp, 0o755)
	return append(env, "HOME="+home, "TMPDIR="+tmp)
}

// capBuffer is an io.Writer that keeps the first max bytes and counts
// the rest.
type capBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
		c.dropped += int64(len(p) - min(room, len(p)))
	} else {
		c.dropped += int64(len(p))
	}
	return len(p), nil
}

func (c *capBuffer) Bytes() []byte {
	if c.dropped > 0 {
		return append(c.buf.Bytes(), fmt.Sprintf("\n[... %d more bytes not kept]\n", c.dropped)...)
	}
	return c.buf.Bytes()
}

// headTail keeps the start and the end of s within n bytes.
func headTail(s string, n int) string {
	if n < 64 {
		n = 64
	}
	if len(s) <= n {
		return s
	}
	h := textsafe.Cap(s, n/3)
	t := s[len(s)-(n-n/3-64):]
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return fmt.Sprintf("%s\n[... %d bytes cut; the full log is in the call's output directory ...]\n%s", h, len(s)-len(h)-len(t), t)
}

// relToWorkspace turns a path the runner printed (absolute inside the
// view, or relative to dir) into a project-relative slash path; a path
// outside the project (module cache, GOROOT) stays as printed.
func relToWorkspace(ws, dir, p string) string {
	if p == "" {
		return ""
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(dir, p)
	}
	rel, err := filepath.Rel(ws, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return path.Clean(filepath.ToSlash(rel))
}
