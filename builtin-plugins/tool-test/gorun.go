package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// goEvent is one line of `go test -json`: test2json's TestEvent plus the
// build events (ImportPath, build-output, build-fail) and FailedBuild.
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

// goModuleDir finds the directory of the go.mod governing target (target
// itself or its nearest parent inside the project).
func goModuleDir(ws, target string) (string, bool) {
	for d := target; ; d = path.Dir(d) {
		if st, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(d), "go.mod")); err == nil && st.Mode().IsRegular() {
			return d, true
		}
		if d == "." || d == "/" {
			return "", false
		}
	}
}

func (j *job) runGo(ctx context.Context, timeout time.Duration) testrun.Run {
	modDir, ok := goModuleDir(j.ws, j.target)
	if !ok {
		return testrun.Run{Status: testrun.RunnerError, Summary: fmt.Sprintf("no go.mod in %s or any directory above it in the project: go test needs a module", j.target)}
	}
	cwd := filepath.Join(j.ws, filepath.FromSlash(modDir))
	rel := "."
	if j.target != modDir {
		rel = "./" + strings.TrimPrefix(j.target, modDir+"/")
		if modDir == "." {
			rel = "./" + j.target
		}
	}
	pattern := rel + j.pattern
	if rel == "." && j.pattern == "/..." {
		pattern = "./..."
	}
	confined := filepath.Join(j.scratch, "run")
	gowork := filepath.Join(j.scratch, "gowork")
	for _, d := range []string{confined, gowork} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return testrun.Run{Status: testrun.RunnerError, Summary: "scratch directory: " + err.Error()}
		}
	}
	gocache := filepath.Join(j.scratch, "gocache")
	if j.cache != "" {
		gocache = filepath.Join(j.cache, "go-build")
	}
	env := append(j.baseEnv(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local",
		"GOTELEMETRY=off", "GOENV=off", "CGO_ENABLED=0", "GOCACHE="+gocache, "GOTMPDIR="+gowork)
	if prog := j.goCacheProg(gocache); prog != "" {
		// The host's build cache, read-only, under the project's: a
		// first run links what the user's machine already compiled.
		env = append(env, "GOCACHEPROG="+prog)
	}
	// -e: every compile error of the project's packages, not the first
	// ten (the one a model must fix can be the eleventh).
	argv := []string{"go", "test", "-json", "-count=1", "-timeout=0", goAllErrors(cwd),
		"-exec", strings.Join(landlock.Command(j.self, confined), " ")}
	cover := filepath.Join(j.scratch, "cover.out")
	if j.args.Coverage {
		argv = append(argv, "-cover", "-coverprofile="+cover)
	}
	plain := append(slices.Clone(argv), pattern)
	argv = plain
	if dir, unlock := j.testBinDir(modDir); dir != "" {
		defer unlock()
		argv = append(argv[:len(argv)-1:len(argv)-1], "-o", dir+"/", pattern)
	}
	stdout := &capBuffer{max: maxLogBytes}
	start := time.Now()
	res := j.execute(ctx, command{argv: argv, dir: cwd, env: env, timeout: timeout}, stdout)
	if len(argv) != len(plain) && !res.timedOut && res.exitCode != 0 &&
		!bytes.Contains(res.stdout, []byte(`"Action"`)) && bytes.Contains(j.log.Bytes(), []byte(oCollision)) {
		// Two packages of one name: -o cannot keep both binaries; run
		// as before, linking into the go command's work directory.
		argv = plain
		stdout = &capBuffer{max: maxLogBytes}
		res = j.execute(ctx, command{argv: argv, dir: cwd, env: env, timeout: max(timeout-time.Since(start), time.Second)}, stdout)
	}
	run, full, unfinished := parseGo(res.stdout, j.ws, cwd)
	run.Command = argv
	j.log.Write([]byte(full))
	if b, err := os.ReadFile(filepath.Join(confined, landlock.FailedMarker)); err == nil {
		run.Status = testrun.RunnerError
		run.Summary = "the test binaries could not be confined: " + textsafe.Cap(string(b), 512)
		return run
	}
	switch {
	case res.timedOut:
		run.Status = testrun.Timeout
		run.Summary = fmt.Sprintf("stopped after %s (timeout_seconds)", timeout.Round(time.Second))
		if len(unfinished) > 0 {
			run.Summary += "; still running: " + textsafe.Cap(strings.Join(unfinished, ", "), 1024)
		}
		if len(run.Tests) == 0 && len(run.BuildErrors) == 0 {
			// Killed while compiling: what was compiled is in the cache.
			run.Summary += "; the build had not finished (a first run on an empty build cache compiles the standard library); run test.run again: the cache keeps what was built"
		}
	case res.err != nil:
		run.Status = testrun.RunnerError
		run.Summary = "go test could not run: " + res.err.Error()
		if os.IsNotExist(res.err) || strings.Contains(res.err.Error(), "executable file not found") {
			run.Summary += "; the Go toolchain is not in the sandbox: list its directory (e.g. /usr/local/go) in the policy's toolchains section"
		}
	case run.Status == "" && res.exitCode != 0 && goTooNew(j.log.Bytes()) != "":
		// No change to the code fixes this: the sandbox has one toolchain.
		msg := goTooNew(j.log.Bytes())
		run.Status = testrun.BuildFailed
		run.BuildErrors = []testrun.BuildError{{File: relToWorkspace(j.ws, cwd, "go.mod"), Message: textsafe.Cap(msg, 1024)}}
		run.Summary = "the sandbox's Go toolchain is older than go.mod's go line and cannot download another (no network): install that Go on the host and list it in the policy's toolchains section, or lower the go line if the code does not need it"
	case run.Status == "" && res.exitCode != 0:
		run.Status = testrun.RunnerError
		run.Summary = fmt.Sprintf("go test failed before running anything (%s): %s", res.state, textsafe.Cap(strings.TrimSpace(lastLines(j.log.Bytes(), 10)), 1024))
	}
	if run.Status == testrun.BuildFailed && run.Summary == "" {
		run.Summary = "a module the code imports is not in the sandbox's module cache and cannot be downloaded there (no network): run `go mod download` (or `go test ./...` once) in the project on the host, so ~/go/pkg/mod has it"
	}
	if run.Status == testrun.Red || run.Status == testrun.Green {
		if j.args.Coverage {
			run.Coverage = goCoverage(cover, cwd, j.ws)
		}
	}
	if run.Status == "" {
		run.Status = testrun.NoTests
	}
	return run
}

// parseGo reads a `go test -json` stream and classifies it. Status stays
// "" when the stream holds no package result at all.
func parseGo(stream []byte, ws, cwd string) (run testrun.Run, full string, unfinished []string) {
	type key struct{ pkg, test string }
	tests := map[key]*testrun.Test{}
	var order []key
	msgs := map[key]*strings.Builder{}
	buildOut := map[string][]string{} // import path → build output lines
	var buildFailed []string
	pkgOut := map[string]*strings.Builder{}
	pkgFailed := map[string]bool{}
	pkgResult := false
	var text strings.Builder // what the model sees: failures only
	var fb strings.Builder
	fb2 := &fb
	for line, p := range reportLines[goEvent](stream) {
		if p == nil {
			fb2.Write(line)
			fb2.WriteByte('\n')
			continue
		}
		ev := *p
		switch ev.Action {
		case "build-output":
			buildOut[ev.ImportPath] = append(buildOut[ev.ImportPath], strings.TrimSuffix(ev.Output, "\n"))
			fb2.WriteString(ev.Output)
			continue
		case "build-fail":
			buildFailed = append(buildFailed, ev.ImportPath)
			continue
		}
		if ev.Output != "" {
			fb2.WriteString(ev.Output)
		}
		if ev.Test == "" {
			switch ev.Action {
			case "output":
				b := pkgOut[ev.Package]
				if b == nil {
					b = &strings.Builder{}
					pkgOut[ev.Package] = b
				}
				if b.Len() < 64<<10 {
					b.WriteString(ev.Output)
				}
			case "pass", "skip":
				pkgResult = true
			case "fail":
				pkgResult = true
				if ev.FailedBuild == "" {
					pkgFailed[ev.Package] = true
				} else if len(buildOut[ev.FailedBuild]) == 0 {
					// A failed build with no compiler output: say so.
					buildOut[ev.FailedBuild] = []string{strings.TrimSpace(pkgOut[ev.Package].String())}
				}
			}
			continue
		}
		k := key{ev.Package, ev.Test}
		t := tests[k]
		if t == nil {
			t = &testrun.Test{Name: ev.Test, Package: ev.Package}
			tests[k] = t
			msgs[k] = &strings.Builder{}
			order = append(order, k)
		}
		switch ev.Action {
		case "output":
			if m := msgs[k]; m.Len() < 64<<10 {
				m.WriteString(ev.Output)
			}
		case "pass":
			t.Status, t.DurationMS = testrun.Pass, int64(ev.Elapsed*1000)
		case "fail":
			t.Status, t.DurationMS = testrun.Fail, int64(ev.Elapsed*1000)
		case "skip":
			t.Status, t.DurationMS = testrun.Skip, int64(ev.Elapsed*1000)
		}
	}
	// Build errors, in the order the builds failed.
	seen := map[string]bool{}
	for _, ip := range buildFailed {
		if seen[ip] {
			continue
		}
		seen[ip] = true
		pkg, _, _ := strings.Cut(ip, " ")
		for _, l := range buildOut[ip] {
			text.WriteString(l + "\n")
		}
		run.BuildErrors = append(run.BuildErrors, parseBuildOutput(buildOut[ip], pkg, ws, cwd)...)
	}
	failedIn := map[string]bool{}
	for _, k := range order {
		t := tests[k]
		if t.Status == "" {
			// Started, never ended: the binary was killed or crashed.
			t.Status = testrun.Fail
			unfinished = append(unfinished, k.pkg+" "+k.test)
		}
		if t.Status == testrun.Fail {
			t.Message = tailClip(msgs[k].String(), maxMessageBytes)
			failedIn[k.pkg] = true
			text.WriteString(t.Message)
		}
		run.Tests = append(run.Tests, *t)
	}
	// A package that failed without a failing test (TestMain exit, a
	// panic in init, a crash between tests) is one failure of its own.
	for pkg := range pkgFailed {
		if failedIn[pkg] {
			continue
		}
		msg := tailClip(pkgOut[pkg].String(), maxMessageBytes)
		run.Tests = append(run.Tests, testrun.Test{Name: "(package)", Package: pkg, Status: testrun.Fail, Message: msg})
		text.WriteString(msg)
	}
	run.Output = text.String()
	if pkgResult || len(buildFailed) > 0 {
		run.Status = classifyGo(run)
	}
	return run, fb.String(), unfinished
}

// classifyGo: build errors decide first, then failures, then passes. A
// build error is red — the project's code or tests do not compile yet and
// a change to them fixes it — unless it is one no change to the code can
// fix (a module the sandbox cannot fetch, a dependency that is not
// installed): that is build_error. Undefined and InTestFile still say
// which errors are a new test's missing names.
func classifyGo(run testrun.Run) testrun.Status {
	if len(run.BuildErrors) > 0 {
		for _, be := range run.BuildErrors {
			if unfixable(be) {
				return testrun.BuildFailed
			}
		}
		return testrun.Red
	}
	for _, t := range run.Tests {
		if t.Status == testrun.Fail {
			return testrun.Red
		}
	}
	for _, t := range run.Tests {
		if t.Status == testrun.Pass {
			return testrun.Green
		}
	}
	return testrun.NoTests
}

// unfixable: the runner's words for what the environment lacks rather
// than what the code gets wrong: the go command's module it cannot fetch
// (GOPROXY=off, no network) or verify, Python's import of a module that
// is neither in the project nor installed.
func unfixable(be testrun.BuildError) bool {
	return missingModule(be.Message) ||
		strings.HasPrefix(be.Message, "ModuleNotFoundError: ") && !be.Undefined
}

// missingModule reports the go command's words for a module the sandbox
// cannot fetch (GOPROXY=off, no network) or verify.
func missingModule(msg string) bool {
	return strings.Contains(msg, "GOPROXY=off") || strings.Contains(msg, "missing go.sum entry")
}

// goTooNew finds the go command's refusal of a go.mod that needs a newer
// toolchain than the sandbox's ("go: go.mod requires go >= 1.99 (running
// go 1.26; GOTOOLCHAIN=local)"), "" if there is none.
func goTooNew(log []byte) string {
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "requires go >= ") && strings.Contains(l, "GOTOOLCHAIN=local") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// goAllErrors is the -gcflags that lifts the compiler's ten-error limit
// for the module's own packages only (the standard library and the
// dependencies keep their cached builds).
func goAllErrors(modRoot string) string {
	if mp := goModulePath(filepath.Join(modRoot, "go.mod")); mp != "" && !strings.ContainsAny(mp, " =") {
		return "-gcflags=" + mp + "/...=-e"
	}
	return "-gcflags=-e"
}

// failedPackages names the packages of errs, in order, once each.
func failedPackages(errs []testrun.BuildError) []string {
	var out []string
	seen := map[string]bool{}
	for _, be := range errs {
		if be.Package != "" && !seen[be.Package] {
			seen[be.Package] = true
			out = append(out, be.Package)
		}
	}
	return out
}

// parseBuildOutput turns the compiler's and go command's diagnostics of
// one failed build into BuildErrors. Each diagnostic is
// "file:line[:col]: message" (gc's documented form); a line starting
// with a tab continues the previous one; "# pkg" headers are dropped.
func parseBuildOutput(lines []string, pkg, ws, cwd string) []testrun.BuildError {
	var out []testrun.BuildError
	for _, l := range lines {
		switch {
		case l == "" || strings.HasPrefix(l, "# "):
			continue
		case strings.HasPrefix(l, "\t") && len(out) > 0:
			out[len(out)-1].Message = textsafe.Cap(out[len(out)-1].Message+"\n"+l, 1024)
			continue
		}
		be := testrun.BuildError{Package: pkg, Message: textsafe.Cap(l, 1024)}
		if f, ln, col, msg, ok := splitDiag(l); ok {
			be.File = relToWorkspace(ws, cwd, f)
			be.Line, be.Column, be.Message = ln, col, textsafe.Cap(msg, 1024)
			be.InTestFile = strings.HasSuffix(f, "_test.go")
			be.Undefined = undefinedName(msg)
		}
		out = append(out, be)
	}
	return out
}

// splitDiag splits "file:line:col: msg" or "file:line: msg".
func splitDiag(l string) (file string, line, col int, msg string, ok bool) {
	parts := strings.SplitN(l, ":", 4)
	if len(parts) < 3 {
		return "", 0, 0, "", false
	}
	line, err := strconv.Atoi(parts[1])
	if err != nil || line <= 0 || parts[0] == "" {
		return "", 0, 0, "", false
	}
	if len(parts) == 4 {
		if c, err := strconv.Atoi(parts[2]); err == nil {
			return parts[0], line, c, strings.TrimSpace(parts[3]), true
		}
		return parts[0], line, 0, strings.TrimSpace(parts[2] + ":" + parts[3]), true
	}
	return parts[0], line, 0, strings.TrimSpace(parts[2]), true
}

// undefinedName: the type checker's report of a name, field or method
// that does not exist ("undefined: Sub", "x.Sub undefined (type T has no
// field or method Sub)").
func undefinedName(msg string) bool {
	return strings.HasPrefix(msg, "undefined: ") || strings.Contains(msg, " undefined (type ")
}

// tailClip keeps the end of s (where a failure's message is) within n.
func tailClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	t := s[len(s)-n:]
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return "…" + t
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) string {
	s := strings.TrimRight(string(b), "\n")
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			n--
			if n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// goCoverage summarises a coverprofile ("mode: x" then
// "importpath/file.go:l.c,l.c stmts count" lines) per project file.
func goCoverage(profile, modRoot, ws string) *testrun.Coverage {
	b, err := os.ReadFile(profile)
	if err != nil {
		return nil
	}
	modPath := goModulePath(filepath.Join(modRoot, "go.mod"))
	files := map[string]*coverCount{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "mode:") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		name, _, _ := strings.Cut(f[0], ":")
		stmts, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		if modPath != "" {
			if r, ok := strings.CutPrefix(name, modPath+"/"); ok {
				name = relToWorkspace(ws, modRoot, r)
			}
		}
		c := files[name]
		if c == nil {
			c = &coverCount{}
			files[name] = c
		}
		c.total += stmts
		if count > 0 {
			c.hit += stmts
		}
	}
	return summariseCoverage(files)
}

// goModulePath reads the module path from a go.mod's module directive.
func goModulePath(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "module" {
			if u, err := strconv.Unquote(f[1]); err == nil {
				return u
			}
			return f[1]
		}
	}
	return ""
}

// oCollision is the go command's refusal of -o dir/ for two packages of
// one name (e.g. a/util and b/util).
const oCollision = "cannot write test binary"

// testBinDir is where the go command keeps the test binaries of the
// module at modDir between runs (`go test -o dir/`): the go command does
// not relink a binary whose build ID already matches, which saves the
// link, the largest step of a warm run. It lives in the kernel-owned
// build cache, written only by the go command; the binaries themselves
// run through the confine launcher, whose Landlock rules allow writes
// to the run's scratch directory alone, so a test cannot alter its own
// binary or a later run's. It returns "" (no reuse) without the cache,
// or when another run of the same module holds the directory; unlock
// releases it.
func (j *job) testBinDir(modDir string) (dir string, unlock func()) {
	if j.cache == "" {
		return "", nil
	}
	sum := sha256.Sum256([]byte(modDir))
	dir = filepath.Join(j.cache, "go-test-bin", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		j.logger.Debug("no test binary directory", "error", err)
		return "", nil
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		// A concurrent run of the same module: link afresh rather than
		// overwrite the binaries it is running.
		f.Close()
		return "", nil
	}
	return dir, func() { f.Close() }
}
