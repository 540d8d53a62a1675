package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"

	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// runPytest runs pytest (itself confined: it imports the project's code)
// with a junit XML report in the scratch directory. --rootdir is the
// project root, so the report's node ids are project-relative; the cache
// provider is off and bytecode is not written, so pytest writes nothing
// but the report and what the tests write under the scratch directory.
// The project's virtualenv is used when it has one (pythonEnv), and the
// summary says which interpreter and environment ran.
func (j *job) runPytest(ctx context.Context, timeout time.Duration) testrun.Run {
	pe, err := j.pythonEnv()
	if err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: textsafe.Text(err.Error(), 2<<10)}
	}
	run := j.pytestWith(ctx, timeout, pe)
	run.Summary = strings.TrimSpace(run.Summary + "\n" + pe.describe())
	return run
}

func (j *job) pytestWith(ctx context.Context, timeout time.Duration, pe pyEnv) testrun.Run {
	confined := filepath.Join(j.scratch, "run")
	if err := os.MkdirAll(confined, 0o755); err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: "scratch directory: " + err.Error()}
	}
	report := filepath.Join(confined, "junit.xml")
	// --continue-on-collection-errors: the modules that import still run,
	// so one result has both the failing tests and every module that
	// does not import.
	argv := append(landlock.Command(j.self, confined), pe.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
		"--continue-on-collection-errors", "--rootdir="+j.ws, "--junitxml="+report, "-o", "junit_family=xunit2")
	if j.target != "." {
		argv = append(argv, j.target)
	}
	env := append(j.baseEnv(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	env = append(env, pe.env...)
	if pe.bin != "" {
		env = setEnv(env, "PATH", pe.bin+string(os.PathListSeparator)+getEnv(env, "PATH"))
	}
	stdout := &capBuffer{max: maxLogBytes}
	mark := j.log.buf.Len()
	res := j.execute(ctx, command{argv: argv, dir: j.ws, env: env, timeout: timeout}, stdout)
	j.log.Write(res.stdout)
	run := testrun.Run{Command: argv[3:]}
	if res.timedOut {
		return j.timedOut(run, timeout)
	}
	if b, err := os.ReadFile(filepath.Join(confined, landlock.FailedMarker)); err == nil {
		run.Status, run.Summary = testrun.RunnerError, "pytest could not be confined: "+textsafe.Cap(string(b), 512)
		return run
	}
	data, err := os.ReadFile(report)
	if err != nil {
		// pytest exits 4 on usage errors and 3 on internal errors, without
		// a report; a missing python3 or pytest gives none either.
		words := textsafe.Text(j.runnerWords(mark), 1024)
		if words == "" {
			words = "(it printed nothing)"
		}
		run.Status = testrun.RunnerError
		run.Summary = fmt.Sprintf("pytest did not run (exit code %d, no report): %s", res.exitCode, words)
		if res.err != nil {
			run.Summary += "; " + textsafe.Text(res.err.Error(), 512)
		}
		if strings.Contains(words, "No module named pytest") {
			if pe.venv != "" {
				run.Summary += fmt.Sprintf("; pytest is not installed in the project's virtualenv: on the host, run `%s/bin/python -m pip install pytest` (or add it to the project's dev dependencies and sync)", pe.venv)
			} else {
				run.Summary += "; pytest is not installed for the sandbox's python3 (/usr): install it on the host (`apt-get install python3-pytest`), or give the project a virtualenv (.venv) with pytest in it"
			}
		}
		return run
	}
	parseJUnit(&run, data, j.ws, true)
	run.Output = string(res.stdout)
	if why := pytestExitDisagrees(run, res.exitCode); why != "" {
		run.Summary = why
		run.Status = testrun.RunnerError
	}
	return run
}

// pytestExitDisagrees cross-checks the classification (made from the
// report alone) against pytest's documented exit codes: 0 all passed,
// 1 tests failed, 2 interrupted (collection errors), 3 internal error,
// 4 usage error, 5 no tests collected. A disagreement means the report
// cannot be trusted, and the run is a runner error.
func pytestExitDisagrees(run testrun.Run, code int) string {
	ok := false
	switch run.Status {
	case testrun.Green:
		ok = code == 0
	case testrun.NoTests:
		ok = code == 0 || code == 5 // 0 when every test was skipped
	case testrun.Red:
		ok = code == 1 || code == 2 && len(run.BuildErrors) > 0
	case testrun.BuildFailed:
		// 1 under --continue-on-collection-errors, 2 without it.
		ok = code == 1 || code == 2
	default:
		return ""
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("pytest exited %d, which does not match its report (%s): the report is not trusted", code, run.Status)
}

// nodeHomeEnv names the installation of the node on the user's PATH
// when the kernel mounted it (nvm's, fnm's, a tarball's).
const nodeHomeEnv = "FLUFFY_NODE_HOME"

// runNode runs `node --test` (confined) with the junit reporter, with the
// node on the user's PATH when the kernel mounted it, else the first on
// the sandbox's; the summary says which.
func (j *job) runNode(ctx context.Context, timeout time.Duration) testrun.Run {
	node, env, which := "node", j.baseEnv(), ""
	if h := os.Getenv(nodeHomeEnv); filepath.IsAbs(h) {
		bin := filepath.Join(h, "bin")
		if st, err := os.Stat(filepath.Join(bin, "node")); err == nil && st.Mode().IsRegular() {
			node, which = filepath.Join(bin, "node"), " (the node on the user's PATH)"
			env = setEnv(env, "PATH", bin+string(os.PathListSeparator)+getEnv(env, "PATH"))
		}
	}
	if which == "" {
		if p, err := exec.LookPath(node); err == nil {
			node, which = p, " (the first on the sandbox's PATH)"
		}
	}
	run := j.nodeWith(ctx, timeout, node, env)
	run.Summary = strings.TrimSpace(run.Summary + "\nnode: " + node + which)
	return run
}

func (j *job) nodeWith(ctx context.Context, timeout time.Duration, node string, env []string) testrun.Run {
	confined := filepath.Join(j.scratch, "run")
	if err := os.MkdirAll(confined, 0o755); err != nil {
		return testrun.Run{Status: testrun.RunnerError, Summary: "scratch directory: " + err.Error()}
	}
	report := filepath.Join(confined, "junit.xml")
	argv := append(landlock.Command(j.self, confined), node, "--test", "--test-reporter=junit", "--test-reporter-destination="+report,
		"--test-reporter=spec", "--test-reporter-destination=stdout")
	lcov := filepath.Join(confined, "lcov.info")
	if j.args.Coverage {
		argv = append(argv, "--experimental-test-coverage", "--test-reporter=lcov", "--test-reporter-destination="+lcov)
	}
	if j.target != "." {
		argv = append(argv, j.target)
	}
	stdout := &capBuffer{max: maxLogBytes}
	mark := j.log.buf.Len()
	res := j.execute(ctx, command{argv: argv, dir: j.ws, env: env, timeout: timeout}, stdout)
	j.log.Write(res.stdout)
	run := testrun.Run{Command: argv[3:]}
	if res.timedOut {
		return j.timedOut(run, timeout)
	}
	if b, err := os.ReadFile(filepath.Join(confined, landlock.FailedMarker)); err == nil {
		run.Status, run.Summary = testrun.RunnerError, "node could not be confined: "+textsafe.Cap(string(b), 512)
		return run
	}
	data, err := os.ReadFile(report)
	if err != nil {
		words := textsafe.Text(j.runnerWords(mark), 1024)
		if res.err != nil {
			words = strings.TrimSpace(words + " " + textsafe.Text(res.err.Error(), 512))
		}
		run.Status = testrun.RunnerError
		run.Summary = fmt.Sprintf("node --test did not run (exit code %d, no report): %s", res.exitCode, words)
		return run
	}
	parseJUnit(&run, data, j.ws, false)
	run.Output = string(res.stdout)
	if j.args.Coverage {
		run.Coverage = lcovCoverage(lcov, j.ws)
	}
	return run
}

func (j *job) timedOut(run testrun.Run, timeout time.Duration) testrun.Run {
	run.Status = testrun.Timeout
	run.Summary = fmt.Sprintf("stopped after %s (timeout_seconds)", timeout.Round(time.Second))
	return run
}

// junit is the subset of the JUnit XML both pytest (xunit2) and node's
// junit reporter write: testcases, possibly nested in testsuites.
type junitSuite struct {
	Suites []junitSuite `xml:"testsuite"`
	Cases  []junitCase  `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitProblem `xml:"skipped"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// parseJUnit fills run from a junit report. For pytest, an <error> with
// the collection-failure message is a module that did not import: a
// BuildError (see pytestCollectError for when it is red); an <error> on a
// test (a fixture that raised) fails that test.
func parseJUnit(run *testrun.Run, data []byte, ws string, pytest bool) {
	var root junitSuite
	if err := xml.Unmarshal(data, &root); err != nil {
		run.Status, run.Summary = testrun.RunnerError, "the runner's junit report does not parse: "+err.Error()
		return
	}
	var walk func(s junitSuite)
	walk = func(s junitSuite) {
		for _, c := range s.Cases {
			t := testrun.Test{Name: c.Name, Package: c.ClassName, DurationMS: int64(c.Time * 1000), File: c.File, Status: testrun.Pass}
			if !pytest && filepath.IsAbs(c.Name) {
				// node names a test file that failed as a whole (it did
				// not load, or exited non-zero) by its absolute path.
				t.Name = relToWorkspace(ws, ws, c.Name)
				t.File = t.Name
			}
			switch {
			case c.Error != nil && pytest && c.Error.Message == pytestCollectionFailure:
				run.BuildErrors = append(run.BuildErrors, pytestCollectError(c, ws))
				continue
			case c.Failure != nil:
				t.Status, t.Message = testrun.Fail, tailClip(c.Failure.Message+"\n"+c.Failure.Text, maxMessageBytes)
			case c.Error != nil:
				t.Status, t.Message = testrun.Fail, tailClip(c.Error.Message+"\n"+c.Error.Text, maxMessageBytes)
			case c.Skipped != nil:
				t.Status, t.Message = testrun.Skip, textsafe.Cap(c.Skipped.Message, 512)
			}
			run.Tests = append(run.Tests, t)
		}
		for _, sub := range s.Suites {
			walk(sub)
		}
	}
	walk(root)
	run.Status = classifyGo(*run) // same rules: build errors, failures, passes
}
