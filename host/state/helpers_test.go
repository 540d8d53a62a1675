package state

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
	"github.com/fluffy-waffle/fluffy/policy"
)

// dirView is a real workspace view for the tests: a directory whose hash
// is computed from its files, and the paths the "session" wrote.
type dirView struct {
	dir     string
	mu      sync.Mutex
	changed []string
}

func (v *dirView) ViewHash() string {
	h := sha256.New()
	var files []string
	_ = filepath.WalkDir(v.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	for _, f := range files {
		rel, _ := filepath.Rel(v.dir, f)
		b, _ := os.ReadFile(f)
		sum := sha256.Sum256(b)
		h.Write([]byte(filepath.ToSlash(rel) + "\x00" + hex.EncodeToString(sum[:]) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (v *dirView) ChangedPaths() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.changed)
}

// write writes a file of the view as the session would (through the
// changeset) and records it as changed.
func (v *dirView) write(t testing.TB, rel, content string) {
	t.Helper()
	if err := v.writeFile(rel, content); err != nil {
		t.Fatal(err)
	}
}

func (v *dirView) writeFile(rel, content string) error {
	p := filepath.Join(v.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		return err
	}
	v.mu.Lock()
	if !slices.Contains(v.changed, rel) {
		v.changed = append(v.changed, rel)
	}
	v.mu.Unlock()
	return nil
}

func (v *dirView) setChanged(paths ...string) {
	v.mu.Lock()
	v.changed = paths
	v.mu.Unlock()
}

// approver stands in for the human at /approve.
type approver struct {
	mu     sync.Mutex
	answer bool
	asked  []ReviewRequest
}

func (a *approver) Approve(_ context.Context, r ReviewRequest) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, r)
	return a.answer, nil
}

// env is a project with its real database, audit log, default policy and
// a state manager.
type env struct {
	t       testing.TB
	project string
	db      *store.DB
	log     *audit.Log
	mg      *Manager
	appr    *approver
	pol     *policy.Engine
	mod     func(*Options)
}

func newEnv(t testing.TB, mod func(*Options)) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), mod)
}

// newEnvIn opens the env of an existing project directory.
func newEnvIn(t testing.TB, project string, mod func(*Options)) *env {
	t.Helper()
	e := &env{t: t, project: project, appr: &approver{}, mod: mod}
	p, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	e.pol = policy.NewEngine(p, policy.Options{})
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Dir: store.DefaultDir(e.project)})
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := audit.Open(ctx, audit.Options{DB: db})
	if err != nil {
		e.t.Fatal(err)
	}
	o := Options{DB: db, Audit: l, Policy: e.pol, Approver: e.appr, Project: e.project}
	if e.mod != nil {
		e.mod(&o)
	}
	mg, err := NewManager(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.db, e.log, e.mg = db, l, mg
}

func (e *env) close() {
	if e.log != nil {
		_ = e.log.Close()
		e.log = nil
	}
	if e.db != nil {
		_ = e.db.Close()
		e.db = nil
	}
}

// restart closes and reopens everything, as a kernel restart does.
func (e *env) restart() {
	e.close()
	e.open()
}

func (e *env) records(types ...audit.EventType) []audit.Record {
	e.t.Helper()
	recs, err := e.log.Query(context.Background(), audit.Filter{Types: types})
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// session opens a machine over a copy of fixture (or an empty dir).
func (e *env) session(id, fixture string) (*Machine, *dirView) {
	e.t.Helper()
	v := &dirView{dir: e.t.TempDir()}
	if fixture != "" {
		copyDir(e.t, filepath.Join("testdata", "fixtures", fixture), v.dir)
	}
	m, err := e.mg.Open(context.Background(), SessionConfig{ID: id, ChangesetRef: "changeset-" + id, View: v})
	if err != nil {
		e.t.Fatal(err)
	}
	return m, v
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ---- real `go test -json` runs ----

// goTest runs `go test -json -cover` in dir for real and turns its event
// stream into a testrun.Run, stamped with the view hash of the tree it ran
// on (what the kernel does for test.run). It is a test helper standing in
// for builtin-plugins/tool-test until that plugin lands: it classifies
// only what these fixtures need.
func goTest(t testing.TB, v *dirView) testrun.Run {
	t.Helper()
	run, err := goTestRun(v)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// runCache memoizes runs by view hash: the same tree gives the same
// result (the premise of the view hash itself), so each distinct tree is
// run for real once per test process.
var runCache sync.Map

func goTestRun(v *dirView) (testrun.Run, error) {
	view := v.ViewHash()
	if r, ok := runCache.Load(view); ok {
		return r.(testrun.Run), nil
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "-cover", "./...")
	cmd.Dir = v.dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOWORK=off", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	run := parseGoTestJSON(stdout.Bytes(), stderr.String(), err)
	run.Runner, run.Command = "go", cmd.Args
	run.DurationMS = time.Since(start).Milliseconds()
	// The plugin's answer goes through the contract's decoder, as the
	// kernel's would; then the kernel stamps the view.
	b, err := json.Marshal(run)
	if err != nil {
		return run, err
	}
	dec, err := testrun.Decode(b)
	if err != nil {
		return run, fmt.Errorf("decode run: %w\n%s", err, b)
	}
	dec.ViewHash = view
	runCache.Store(view, dec)
	return dec, nil
}

var buildLineRe = regexp.MustCompile(`^(\S+\.go):(\d+):(\d+): (.*)$`)
var coverRe = regexp.MustCompile(`coverage: ([0-9.]+)% of statements`)

func parseGoTestJSON(out []byte, stderr string, runErr error) testrun.Run {
	var run testrun.Run
	var cov *float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Action, Package, Test, Output, ImportPath string
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Action == "build-output":
			if m := buildLineRe.FindStringSubmatch(strings.TrimSpace(ev.Output)); m != nil {
				file := strings.TrimPrefix(m[1], "./")
				line, _ := strconv.Atoi(m[2])
				col, _ := strconv.Atoi(m[3])
				run.BuildErrors = append(run.BuildErrors, testrun.BuildError{File: file, Line: line, Column: col, Package: ev.ImportPath, Message: m[4],
					Undefined: strings.HasPrefix(m[4], "undefined:"), InTestFile: strings.HasSuffix(file, "_test.go")})
			}
		case ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			run.Tests = append(run.Tests, testrun.Test{Name: ev.Test, Package: ev.Package, Status: ev.Action})
			switch ev.Action {
			case "pass":
				run.Counts.Passed++
			case "fail":
				run.Counts.Failed++
			default:
				run.Counts.Skipped++
			}
		case ev.Action == "output" && ev.Test == "":
			if m := coverRe.FindStringSubmatch(ev.Output); m != nil {
				p, _ := strconv.ParseFloat(m[1], 64)
				cov = &p
			}
		}
	}
	switch {
	case runErr != nil && len(run.BuildErrors) == 0 && len(run.Tests) == 0:
		// The go command failed before any test or compiler error: no
		// module, setup failed.
		run.Status = testrun.RunnerError
		run.Summary = strings.TrimSpace(stderr)
	case len(run.BuildErrors) > 0:
		// As builtin-plugins/tool-test: code or tests that do not compile
		// make the run red, with every build error listed.
		run.Status = testrun.Red
	case run.Counts.Failed > 0:
		run.Status = testrun.Red
	case run.Counts.Passed > 0:
		run.Status = testrun.Green
	default:
		run.Status = testrun.NoTests
	}
	if cov != nil {
		run.Coverage = &testrun.Coverage{Percent: *cov}
	}
	return run
}
