package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// The cargo runner works in two steps, both confined (build scripts and
// proc macros run project code while cargo builds):
//
//  1. `cargo test --no-run --message-format=json` builds the test
//     binaries; its JSON messages give rustc's structured diagnostics
//     (build errors with file:line and error code) and each test binary
//     with the target it was built from.
//  2. each test binary runs with libtest's JSON report
//     (`-Z unstable-options --format=json`), which a stable libtest
//     accepts when RUSTC_BOOTSTRAP=1 is in the binary's environment.
//
// Only the test binaries get RUSTC_BOOTSTRAP=1, so the project's code is
// compiled as a stable toolchain compiles it (#![feature] is refused).
// cargo itself gets it for one unstable flag, -Zlockfile-path (the view
// is read-only and cargo writes Cargo.lock), and hands rustc and build
// scripts RUSTC_BOOTSTRAP=-1 through a forced [env] entry. Doc-tests are
// not run: rustdoc compiles them in the same process that would need
// RUSTC_BOOTSTRAP=1 for the JSON report.

// cargoMsg is one line of cargo's --message-format=json (the fields the
// runner reads of compiler-artifact, compiler-message, build-finished).
type cargoMsg struct {
	Reason       string      `json:"reason"`
	PackageID    string      `json:"package_id"`
	ManifestPath string      `json:"manifest_path"`
	Target       cargoTarget `json:"target"`
	Profile      struct {
		Test bool `json:"test"`
	} `json:"profile"`
	Executable string    `json:"executable"`
	Message    *rustDiag `json:"message"`
	Success    bool      `json:"success"`
}

type cargoTarget struct {
	Kind    []string `json:"kind"`
	Name    string   `json:"name"`
	SrcPath string   `json:"src_path"`
}

// key identifies a target of a package across cargo's messages.
func (m cargoMsg) key() string {
	return m.PackageID + "\x00" + strings.Join(m.Target.Kind, ",") + "\x00" + m.Target.Name
}

// rustDiag is rustc's JSON diagnostic (the fields read).
type rustDiag struct {
	Message string `json:"message"`
	Code    *struct {
		Code string `json:"code"`
	} `json:"code"`
	Level string `json:"level"`
	Spans []struct {
		FileName    string `json:"file_name"`
		LineStart   int    `json:"line_start"`
		ColumnStart int    `json:"column_start"`
		IsPrimary   bool   `json:"is_primary"`
	} `json:"spans"`
	Rendered string `json:"rendered"`
}

// rustUndefined are rustc's error codes for a name, path, field or
// method that does not exist: the compile error of a test written before
// the code it tests.
var rustUndefined = map[string]bool{
	"E0405": true, // cannot find trait
	"E0412": true, // cannot find type
	"E0422": true, // cannot find struct, variant or union type
	"E0425": true, // cannot find value or function
	"E0432": true, // unresolved import
	"E0433": true, // failed to resolve (undeclared type or module)
	"E0531": true, // cannot find tuple struct or variant
	"E0599": true, // no method or associated item
	"E0609": true, // no field
}

// libtestEvent is one line of libtest's JSON report.
type libtestEvent struct {
	Type     string  `json:"type"`
	Event    string  `json:"event"`
	Name     string  `json:"name"`
	ExecTime float64 `json:"exec_time"`
	Stdout   string  `json:"stdout"`
	Message  string  `json:"message"`
}

// testBinary is one test executable the build produced.
type testBinary struct {
	exe, dir, label string
}

func (j *job) runCargo(ctx context.Context, timeout time.Duration) testrun.Run {
	deadline := time.Now().Add(timeout)
	left := func() time.Duration { return max(time.Until(deadline), time.Second) }
	manDir, ok := manifestDir(j.ws, j.target, "Cargo.toml")
	if !ok {
		return testrun.Run{Status: testrun.RunnerError, Summary: fmt.Sprintf("no Cargo.toml in %s or any directory above it in the project: cargo test needs a package", j.target)}
	}
	env := j.baseEnv()
	pin, err := findRustPin(j.ws, manDir)
	if err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: err.Error()}
	}
	bin, note, err := rustToolchainBin(ctx, env, os.Getenv("HOME"), pin)
	if err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: err.Error()}
	}
	if note != "" {
		fmt.Fprintln(j.log, note)
	}
	confined := filepath.Join(j.scratch, "run")
	lockDir := filepath.Join(confined, "lock")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: "scratch directory: " + err.Error()}
	}
	cargoHome := filepath.Join(confined, "cargo-home")
	if msg, err := linkRegistry(cargoHome, getEnv(env, registryEnv)); err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: "scratch directory: " + err.Error()}
	} else if msg != "" {
		fmt.Fprintln(j.log, msg)
	}
	env = setEnv(env, "PATH", bin+string(os.PathListSeparator)+getEnv(env, "PATH"))
	env = append(env, "CARGO_HOME="+cargoHome, "CARGO_TARGET_DIR="+filepath.Join(confined, "target"),
		"CARGO_NET_OFFLINE=true", "CARGO_TERM_COLOR=never", "CARGO_INCREMENTAL=0", "RUSTC_BOOTSTRAP=1")
	if kv := linkerEnv(ctx, env, bin); kv != "" {
		env = append(env, kv)
	}
	cwd := filepath.Join(j.ws, filepath.FromSlash(manDir))
	cargo := filepath.Join(bin, "cargo")
	confine := landlock.Command(j.self, confined)

	// The workspace root: where Cargo.lock is and what rustc's paths are
	// relative to.
	stdout := &capBuffer{max: 64 << 10}
	res := j.execute(ctx, command{argv: append(slices.Clone(confine), cargo, "locate-project", "--workspace", "--message-format", "plain", "--offline"), dir: cwd, env: env, timeout: left()}, stdout)
	if r, bad := j.cargoFailed(res, confined, "cargo locate-project", timeout); bad {
		return r
	}
	root := filepath.Dir(strings.TrimSpace(string(res.stdout)))
	lock := filepath.Join(lockDir, "Cargo.lock")
	if b, err := os.ReadFile(filepath.Join(root, "Cargo.lock")); err == nil {
		if err := os.WriteFile(lock, b, 0o644); err != nil {
			return testrun.Run{Status: testrun.RunnerError, Summary: "scratch directory: " + err.Error()}
		}
	}
	warm, warmed := j.warmCargo(ctx, env, bin, root, cwd, left, filepath.Join(confined, "target"))
	if warmed {
		env = setEnv(env, "CARGO_HOME", warm.home)
	}
	flags := []string{"--offline", "--message-format=json", "-Zlockfile-path",
		"--config", "resolver.lockfile-path=" + strconv.Quote(lock),
		"--config", `env.RUSTC_BOOTSTRAP.value="-1"`, "--config", "env.RUSTC_BOOTSTRAP.force=true"}
	if j.pattern == "/..." {
		flags = append(flags, "--workspace")
	}
	argv := append([]string{"cargo", "test", "--no-run", "--no-fail-fast"}, flags...)
	stdout = &capBuffer{max: maxLogBytes}
	res = j.execute(ctx, command{argv: append(append(slices.Clone(confine), cargo), argv[1:]...), dir: cwd, env: env, timeout: left()}, stdout)
	run := testrun.Run{Command: argv}
	if r, bad := j.cargoFailed(res, confined, "cargo test --no-run", timeout); bad && res.exitCode != 101 {
		r.Command = argv
		return r
	}
	build := parseCargoBuild(res.stdout, j.ws, root)
	j.log.Write([]byte(build.text))
	if warmed {
		fmt.Fprintf(j.log, "cargo build cache: fresh from the cache: %s\n", strings.Join(freshDependencies(res.stdout), ", "))
	}
	if !build.finished {
		run.Status = testrun.RunnerError
		run.Summary = fmt.Sprintf("cargo test failed before building (%s): %s", res.state, textsafe.Cap(strings.TrimSpace(lastLines(j.log.Bytes(), 10)), 1024))
		if strings.Contains(run.Summary, "offline") {
			run.Summary += "; the sandbox has no network: crates come only from the host's ~/.cargo/registry (read-only, policy toolchains entry with env " + registryEnv + "), so run `cargo fetch` in the project on the host, or vendor the dependencies (cargo vendor) into the project"
		}
		return run
	}
	for _, be := range build.errors {
		if be.File == "" && strings.HasPrefix(be.Message, "linker `") && strings.Contains(be.Message, "not found") {
			run.Status = testrun.RunnerError
			run.Summary = "rustc cannot link the tests: " + be.Message + "; the C compiler rustc links with (cc, gcc or clang) must be in the sandbox: list its directory (e.g. /usr) in the policy's toolchains section"
			return run
		}
	}
	if len(build.errors) > 0 {
		run.Output = build.rendered
		pass := func(args ...string) (cargoBuild, bool) {
			stdout := &capBuffer{max: maxLogBytes}
			argv := append(append(append(slices.Clone(confine), cargo), args...), flags...)
			res := j.execute(ctx, command{argv: argv, dir: cwd, env: env, timeout: left()}, stdout)
			return parseCargoBuild(res.stdout, j.ws, root), res.timedOut
		}
		// cargo stops at the first crate that fails: when that was the
		// plain lib (built for doc-tests and integration tests), its unit
		// tests were never compiled, and their errors — a new test's
		// missing names — would be missing. So the unit tests are compiled
		// alone too, and the plain build with --keep-going: an error the
		// plain build of its crate does not have is in #[cfg(test)] code.
		unit, late := pass("test", "--no-run", "--lib")
		if late {
			return j.timedOut(run, timeout)
		}
		plain, late := pass("build", "--keep-going")
		if late {
			return j.timedOut(run, timeout)
		}
		errs, targets := mergeCargoErrors(build.errors, build.errorTarget, unit.errors, unit.errorTarget)
		inPlain := map[cargoErrAt]bool{}
		plainCrates := map[string]bool{}
		for _, be := range plain.errors {
			inPlain[errAt(be)] = true
			plainCrates[be.Package] = true
		}
		for i := range errs {
			k := targets[i]
			if k != "" && (build.built[k] || plain.built[k] || plainCrates[errs[i].Package] && !inPlain[errAt(errs[i])]) {
				errs[i].InTestFile = true
			}
		}
		run.BuildErrors = errs
		run.Status = classifyGo(run)
		return run
	}
	return j.runTestBinaries(ctx, run, build.binaries, env, confine, deadline, timeout)
}

// cargoFailed reports a cargo command that did not run to a result:
// timed out, could not start or be confined, or (for exit codes other
// than 101, cargo's "the build or a test failed") failed on its own.
func (j *job) cargoFailed(res cmdResult, confined, what string, timeout time.Duration) (testrun.Run, bool) {
	var run testrun.Run
	if b, err := os.ReadFile(filepath.Join(confined, landlock.FailedMarker)); err == nil {
		run.Status, run.Summary = testrun.RunnerError, "cargo could not be confined: "+textsafe.Cap(string(b), 512)
		return run, true
	}
	switch {
	case res.timedOut:
		return j.timedOut(run, timeout), true
	case res.err != nil:
		run.Status, run.Summary = testrun.RunnerError, what+" could not run: "+res.err.Error()
		return run, true
	case res.exitCode != 0:
		run.Status = testrun.RunnerError
		run.Summary = fmt.Sprintf("%s failed (%s): %s", what, res.state, textsafe.Cap(strings.TrimSpace(lastLines(j.log.Bytes(), 10)), 1024))
		return run, true
	}
	return run, false
}

// cargoBuild is what a cargo build's JSON messages say.
type cargoBuild struct {
	finished, success bool
	binaries          []testBinary
	built             map[string]bool // non-test artifacts by target key
	errors            []testrun.BuildError
	errorTarget       []string // target key of each error, "" for an integration test's
	rendered          string   // rustc's text of the errors
	text              string   // everything rendered, for the log
}

func parseCargoBuild(stream []byte, ws, root string) cargoBuild {
	b := cargoBuild{built: map[string]bool{}}
	var rendered, text strings.Builder
	for line, p := range reportLines[cargoMsg](stream) {
		if p == nil {
			text.Write(line)
			text.WriteByte('\n')
			continue
		}
		m := *p
		switch m.Reason {
		case "build-finished":
			b.finished, b.success = true, m.Success
		case "compiler-artifact":
			if !m.Profile.Test {
				b.built[m.key()] = true
			}
			if m.Profile.Test && m.Executable != "" {
				dir := filepath.Dir(m.ManifestPath)
				b.binaries = append(b.binaries, testBinary{exe: m.Executable, dir: dir, label: relToWorkspace(ws, dir, m.Target.SrcPath)})
			}
		case "compiler-message":
			if m.Message == nil {
				continue
			}
			text.WriteString(m.Message.Rendered)
			if m.Message.Level != "error" && m.Message.Level != "error: internal compiler error" {
				continue
			}
			if b.errors = append(b.errors, rustBuildError(*m.Message, m.Target, ws, root)); len(b.errors) <= testrun.MaxBuildErrors {
				if rendered.Len() < 64<<10 {
					rendered.WriteString(m.Message.Rendered)
				}
			}
			k := m.key()
			if hasKind(m.Target.Kind, "test") {
				k = ""
			}
			b.errorTarget = append(b.errorTarget, k)
		}
	}
	b.rendered, b.text = rendered.String(), text.String()
	return b
}

// hasKind reports whether a target's kinds include s.
func hasKind(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rustBuildError turns one rustc error into a BuildError: the primary
// span's place, project-relative; Undefined from the error code;
// InTestFile when the target is an integration test (tests/*.rs) —
// runCargo sets it for errors in #[cfg(test)] code of a lib or bin.
func rustBuildError(d rustDiag, t cargoTarget, ws, root string) testrun.BuildError {
	be := testrun.BuildError{Package: t.Name, Message: textsafe.Cap(d.Message, 1024)}
	for _, s := range d.Spans {
		if s.IsPrimary {
			be.File = relToWorkspace(ws, root, s.FileName)
			be.Line, be.Column = s.LineStart, s.ColumnStart
			break
		}
	}
	if d.Code != nil {
		be.Undefined = rustUndefined[d.Code.Code]
		be.Message = textsafe.Cap(d.Code.Code+": "+d.Message, 1024)
	}
	be.InTestFile = hasKind(t.Kind, "test")
	return be
}

// runTestBinaries runs each test binary (confined, in its package's
// directory as cargo does) with libtest's JSON report and folds the
// reports into run.
func (j *job) runTestBinaries(ctx context.Context, run testrun.Run, bins []testBinary, env, confine []string, deadline time.Time, timeout time.Duration) testrun.Run {
	if len(bins) == 0 {
		run.Status = testrun.NoTests
		run.Summary = "the build produced no test binary"
		return run
	}
	env = setEnv(env, "RUSTC_BOOTSTRAP", "1")
	reported := false
	var text strings.Builder
	for _, b := range bins {
		stdout := &capBuffer{max: maxLogBytes}
		logStart := len(j.log.buf.Bytes())
		argv := append(slices.Clone(confine), b.exe, "-Zunstable-options", "--format=json", "--report-time")
		benv := append(append([]string{}, env...), "CARGO_MANIFEST_DIR="+b.dir)
		res := j.execute(ctx, command{argv: argv, dir: b.dir, env: benv, timeout: max(time.Until(deadline), time.Second)}, stdout)
		tests, unfinished, sawSuite := parseLibtest(res.stdout, b.label)
		j.log.Write(res.stdout)
		if sawSuite {
			reported = true
		}
		failed := false
		for _, t := range tests {
			if t.Status == testrun.Fail {
				failed = true
				text.WriteString(b.label + " " + t.Name + ":\n" + t.Message + "\n")
			}
		}
		run.Tests = append(run.Tests, tests...)
		if res.timedOut {
			run = j.timedOut(run, timeout)
			if len(unfinished) > 0 {
				run.Summary += "; still running: " + textsafe.Cap(strings.Join(unfinished, ", "), 1024)
			}
			return run
		}
		if res.err != nil {
			run.Status, run.Summary = testrun.RunnerError, b.label+": the test binary could not run: "+res.err.Error()
			return run
		}
		stderr := ""
		if lb := j.log.buf.Bytes(); logStart <= len(lb) {
			stderr = string(lb[logStart:])
		}
		switch {
		case res.exitCode != 0 && !failed:
			// Exited non-zero without a failing test: a crash (abort,
			// process::exit) or a binary that does not use libtest.
			msg := tailClip(fmt.Sprintf("%s (%s)\n%s", b.label, res.state, stderr), maxMessageBytes)
			run.Tests = append(run.Tests, testrun.Test{Name: "(test binary)", Package: b.label, File: b.label, Status: testrun.Fail, Message: msg})
			text.WriteString(msg + "\n")
		case !sawSuite:
			// harness = false: a program without libtest's report that
			// exited 0. Nothing says what it tested.
			run.Tests = append(run.Tests, testrun.Test{Name: "(test binary)", Package: b.label, File: b.label, Status: testrun.Skip,
				Message: "exited 0 without a libtest report (harness = false?): not counted as a pass"})
		}
	}
	run.Output = text.String()
	if !reported {
		run.Status = testrun.RunnerError
		run.Summary = "no test binary gave a libtest JSON report: " + textsafe.Cap(strings.TrimSpace(lastLines(j.log.Bytes(), 10)), 1024)
		return run
	}
	run.Status = classifyGo(run)
	return run
}

// parseLibtest reads one test binary's libtest JSON report. A test that
// started and never ended (the binary crashed or was killed) failed.
func parseLibtest(stream []byte, label string) (tests []testrun.Test, unfinished []string, sawSuite bool) {
	idx := map[string]int{}
	for _, p := range reportLines[libtestEvent](stream) {
		if p == nil {
			continue
		}
		ev := *p
		if ev.Type == "suite" {
			sawSuite = true
			continue
		}
		if ev.Type != "test" || ev.Name == "" {
			continue
		}
		i, ok := idx[ev.Name]
		if !ok {
			i = len(tests)
			idx[ev.Name] = i
			tests = append(tests, testrun.Test{Name: ev.Name, Package: label})
		}
		t := &tests[i]
		t.DurationMS = int64(ev.ExecTime * 1000)
		switch ev.Event {
		case "ok":
			t.Status = testrun.Pass
		case "failed", "timeout":
			t.Status = testrun.Fail
			t.Message = tailClip(strings.TrimSpace(ev.Stdout+"\n"+ev.Message), maxMessageBytes)
		case "ignored":
			t.Status, t.Message = testrun.Skip, textsafe.Cap(ev.Message, 512)
		}
	}
	for i := range tests {
		if tests[i].Status == "" {
			tests[i].Status = testrun.Fail
			tests[i].Message = "started and never finished: the test binary crashed or was killed"
			unfinished = append(unfinished, label+" "+tests[i].Name)
		}
	}
	return tests, unfinished, sawSuite
}

// rustToolchainBin finds the directory holding cargo and rustc: the
// toolchain the project pins (see findRustPin) or else the default
// toolchain of RUSTUP_HOME (the policy's ~/.rustup entry sets it in the
// sandbox; home/.rustup when unset), else the directory of a cargo on
// PATH (a distribution's /usr/bin/cargo, which ignores toolchain files
// as it does on the host). The rustup proxies in ~/.cargo/bin are not
// used: they need the user's home, which holds registry credentials and
// is never mounted. note says which toolchain a pin chose, for the log.
func rustToolchainBin(ctx context.Context, env []string, home string, pin rustPin) (bin, note string, err error) {
	rh := getEnv(env, "RUSTUP_HOME")
	if rh == "" && home != "" {
		rh = filepath.Join(home, ".rustup")
	}
	if rh != "" {
		if st, err := os.Stat(filepath.Join(rh, "toolchains")); err == nil && st.IsDir() && pin.channel != "" {
			tc, why, err := resolvePinned(ctx, rh, pin.channel)
			if err != nil {
				return "", "", fmt.Errorf("%s: %w", pin.file, err)
			}
			return filepath.Join(rh, "toolchains", tc, "bin"), fmt.Sprintf("%s pins %s: %s", pin.file, pin.channel, why), nil
		}
		if tc := rustupDefault(rh); tc != "" {
			d := filepath.Join(rh, "toolchains", tc, "bin")
			if st, err := os.Stat(filepath.Join(d, "cargo")); err == nil && st.Mode().IsRegular() {
				return d, "", nil
			}
		}
	}
	for _, d := range filepath.SplitList(getEnv(env, "PATH")) {
		p := filepath.Join(d, "cargo")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			if l, err := os.Readlink(p); err == nil && strings.Contains(filepath.Base(l), "rustup") {
				continue // a proxy: it would look for toolchains in the scratch home
			}
			if pin.channel != "" {
				note = fmt.Sprintf("%s pins %s: ignored, no rustup toolchains in the sandbox (cargo from PATH: %s)", pin.file, pin.channel, d)
			}
			return d, note, nil
		}
	}
	return "", "", fmt.Errorf("cargo is not in the sandbox (no default toolchain in RUSTUP_HOME=%s, no cargo on PATH): list the Rust toolchain in the policy's toolchains section — `{path: ~/.rustup, env: RUSTUP_HOME}` for rustup, or the directory holding bin/cargo", rh)
}

// linkerEnv names a linker for the host target when `cc`, rustc's
// default, does not resolve on PATH: a distribution's cc is a link
// through /etc/alternatives, which the sandbox does not mount, while gcc
// and clang link within /usr/bin. "" when cc works or nothing does.
func linkerEnv(ctx context.Context, env []string, bin string) string {
	path := getEnv(env, "PATH")
	if resolvesOnPath("cc", path) != "" {
		return ""
	}
	linker := ""
	for _, c := range []string{"gcc", "clang"} {
		if linker = resolvesOnPath(c, path); linker != "" {
			break
		}
	}
	if linker == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "rustc"), "-vV")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(out), "\n") {
		if host, ok := strings.CutPrefix(l, "host: "); ok {
			host = strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(strings.TrimSpace(host)))
			return "CARGO_TARGET_" + host + "_LINKER=" + linker
		}
	}
	return ""
}

// resolvesOnPath returns the first name on path that is an executable
// file once its links are followed, "" when none is.
func resolvesOnPath(name, path string) string {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// rustupDefault reads default_toolchain from rustup's settings.toml and
// returns the name of its directory under toolchains/ ("stable" is
// installed as "stable-<host triple>").
func rustupDefault(rh string) string {
	b, err := os.ReadFile(filepath.Join(rh, "settings.toml"))
	if err != nil {
		return ""
	}
	name := ""
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == "default_toolchain" {
			name = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return ""
	}
	if st, err := os.Stat(filepath.Join(rh, "toolchains", name)); err == nil && st.IsDir() {
		return name
	}
	entries, _ := os.ReadDir(filepath.Join(rh, "toolchains"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), name+"-") {
			return e.Name()
		}
	}
	return ""
}

// manifestDir finds the directory of the file named name governing
// target (target itself or its nearest parent inside the project).
func manifestDir(ws, target, name string) (string, bool) {
	for d := target; ; d = path.Dir(d) {
		if st, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(d), name)); err == nil && st.Mode().IsRegular() {
			return d, true
		}
		if d == "." || d == "/" {
			return "", false
		}
	}
}

// registryEnv names the sandbox path of the host's ~/.cargo/registry
// (the default policy's toolchains entry).
const registryEnv = "CRATES_REGISTRY_DIR"

// linkRegistry gives the run's scratch CARGO_HOME the host's crates:
// registry/index and registry/cache are symlinks to the read-only mount
// (cargo --offline resolves from the index cache and takes the .crate
// files from cache/), registry/src is scratch, because cargo extracts
// every crate it builds there and the mount is read-only. Only the
// registry is mounted, never ~/.cargo: credentials.toml and config.toml
// (tokens, source replacements) stay on the host.
func linkRegistry(cargoHome, reg string) (string, error) {
	if reg == "" {
		return "", nil
	}
	if !filepath.IsAbs(reg) {
		return fmt.Sprintf("%s=%q is not an absolute path: no registry", registryEnv, reg), nil
	}
	dir := filepath.Join(cargoHome, "registry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var linked []string
	for _, sub := range []string{"index", "cache"} {
		if fi, err := os.Stat(filepath.Join(reg, sub)); err != nil || !fi.IsDir() {
			continue
		}
		link := filepath.Join(dir, sub)
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if err := os.Remove(link); err != nil {
				return "", err
			}
		}
		if err := os.Symlink(filepath.Join(reg, sub), link); err != nil {
			return "", err
		}
		linked = append(linked, sub)
	}
	if len(linked) == 0 {
		return fmt.Sprintf("%s=%s has no index or cache: no registry", registryEnv, reg), nil
	}
	return fmt.Sprintf("crates registry: %s (read-only)", reg), nil
}

func getEnv(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v
		}
	}
	return ""
}

func setEnv(env []string, k, v string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

// cargoErrAt identifies one rustc error across cargo runs.
type cargoErrAt struct {
	file         string
	line, column int
	msg          string
}

func errAt(be testrun.BuildError) cargoErrAt {
	return cargoErrAt{be.File, be.Line, be.Column, be.Message}
}

// mergeCargoErrors appends to a the errors of b it does not have (same
// place and message), keeping each error's target key beside it.
func mergeCargoErrors(a []testrun.BuildError, at []string, b []testrun.BuildError, bt []string) ([]testrun.BuildError, []string) {
	have := map[cargoErrAt]bool{}
	for _, be := range a {
		have[errAt(be)] = true
	}
	for i, be := range b {
		if !have[errAt(be)] {
			have[errAt(be)] = true
			a, at = append(a, be), append(at, bt[i])
		}
	}
	return a, at
}
