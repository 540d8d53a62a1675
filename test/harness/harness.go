package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Call is one tool call of a scripted model turn.
type Call struct {
	Name string
	Args map[string]any
}

// Write is an fs.write of content to path.
func Write(path, content string) Call {
	return Call{"fs.write", map[string]any{"path": path, "content": content}}
}

// TestRun is a test.run of the project's tests.
func TestRun() Call { return Call{"test.run", map[string]any{}} }

// Plan is the plan.complete that opens the test-first workflow.
func Plan() Call {
	return Call{"plan.complete", map[string]any{"plan": "1. a failing test. 2. the change. 3. red, then green."}}
}

// Turns makes the provider events of a scripted model: one turn per
// element (each call's arguments streamed in two halves), then a closing
// answer. A turn costs 2 000 tokens in and 100 out: $0.0048 on gpt-4.1.
func Turns(all ...[]Call) [][]provider.Event {
	var turns [][]provider.Event
	n := 0
	for _, calls := range all {
		var evs []provider.Event
		for _, c := range calls {
			n++
			id := fmt.Sprintf("c%d", n)
			a, _ := json.Marshal(c.Args)
			half := len(a) / 2
			evs = append(evs,
				provider.Event{ToolCallStart: &provider.ToolCallStart{CallID: id, Name: c.Name}},
				provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: id, ArgumentsDelta: string(a[:half])}},
				provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: id, ArgumentsDelta: string(a[half:])}},
				provider.Event{ToolCallEnd: &provider.ToolCallEnd{CallID: id, Name: c.Name, Arguments: a}})
		}
		turns = append(turns, append(evs, provider.Event{Usage: &provider.Usage{InputTokens: 2000, OutputTokens: 100}},
			provider.Event{Done: &provider.Done{StopReason: provider.StopToolUse}}))
	}
	return append(turns, []provider.Event{{TextDelta: "Done: the tests pass."}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}})
}

// Root is the repository's root directory, found from this file's location.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FluffyBin is the fluffy binary `make build` made; the test fails if it
// or the runtime adapter or one of plugins (builtin plugin names) is not
// built beside it.
func FluffyBin(t testing.TB, plugins ...string) string {
	t.Helper()
	bin := filepath.Join(Root(), "bin", "fluffy")
	need := []string{bin, filepath.Join(Root(), "bin", "plugins", "runtime-docker", "runtime-docker")}
	for _, p := range plugins {
		need = append(need, filepath.Join(Root(), "bin", "plugins", p, "plugin.yaml"))
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: these tests run what `make build` builds (make test builds it first): %v", p, err)
		}
	}
	return bin
}

// NeedDocker skips the test when Docker does not answer, unless
// FLUFFY_REQUIRE_DOCKER is set: then it fails.
func NeedDocker(t testing.TB) {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but docker does not answer: %v", err)
		}
		t.Skipf("Docker is not available: %v", err)
	}
}

// ShortHome is a fresh directory under /tmp for $FLUFFY_HOME, removed when
// the test ends: its unix sockets must fit the 108-byte limit, which a
// deep t.TempDir() can exceed.
func ShortHome(t testing.TB, prefix string) string {
	t.Helper()
	h, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(h) })
	return h
}

// User runs commands as a person at a shell in one project (Dir) with
// one environment (Env, which holds $FLUFFY_HOME).
type User struct {
	T      testing.TB
	Fluffy string
	Dir    string
	Env    []string
}

// Cmd is fluffy with args, in the project, not yet started.
func (u User) Cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(u.Fluffy, args...)
	cmd.Dir, cmd.Env = u.Dir, u.Env
	return cmd
}

// Run runs fluffy with args; only a failure to start it fails the test.
func (u User) Run(args ...string) (stdout, stderr string, code int) {
	u.T.Helper()
	cmd := u.Cmd(args...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.T.Fatalf("fluffy %v: %v", args, err)
	}
	return so.String(), se.String(), code
}

// Git runs git with args in the project; a failure fails the test.
func (u User) Git(args ...string) string {
	u.T.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=fluffy-test", "-c", "user.email=fluffy-test@example.com"}, args...)...)
	cmd.Dir = u.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		u.T.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// InitRepo writes files (slash paths relative to the project) into the
// project and commits them as the first commit of a fresh repository.
func (u User) InitRepo(files map[string]string) {
	u.T.Helper()
	for name, content := range files {
		path := filepath.Join(u.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			u.T.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			u.T.Fatal(err)
		}
	}
	u.Git("init", "-q", "-b", "main")
	u.Git("add", "-A")
	u.Git("commit", "-q", "-m", "first")
}

// Tail is the last n bytes of s, for failure messages.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
