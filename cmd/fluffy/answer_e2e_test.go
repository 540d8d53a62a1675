package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// oneShot runs `fluffy ARGS…` in a fresh copy of the demo project with its
// own FLUFFY_HOME, replaying cassettePath, and returns the exit code,
// stdout and stderr.
func oneShot(t *testing.T, fluffy, cassettePath string, args ...string) (int, string, string) {
	t.Helper()
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws := demoProject(t, fluffy, home, cassettePath)
	cmd := exec.Command(fluffy, args...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_RUNTIME_ADAPTER="+filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		_ = stop.Run()
	})
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out), stderr.String()
}

// jsonEvents parses --json output.
func jsonEvents(t *testing.T, out string) []agent.Event {
	t.Helper()
	var evs []agent.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stdout line is not a JSON event: %q", sc.Text())
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != agent.EventDone || evs[len(evs)-1].Done == nil {
		t.Fatalf("no final done event in:\n%s", out)
	}
	return evs
}

// TestOneShotQuestionIsAnswered: a question the model answers from the
// code (one fs.read, then text) ends the task answered, exit 0, "nothing
// changed", without nudging the model to go on; the project is untouched.
func TestOneShotQuestionIsAnswered(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	const cas = "../../examples/cassettes/parseconfig-question.jsonl"
	t.Run("text", func(t *testing.T) {
		code, out, stderr := oneShot(t, fluffy, cas, "--l1", "none", "what does parseConfig do?")
		if code != 0 || !strings.Contains(out, "Answered: nothing changed.") || !strings.Contains(out, "silently ignores") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
	})
	t.Run("json", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "run.jsonl")
		code, out, stderr := oneShot(t, fluffy, cas, "--json", "--l1", "none", "--record", rec, "what does parseConfig do?")
		evs := jsonEvents(t, out)
		d := evs[len(evs)-1].Done
		if code != 0 || d.Status != agent.StatusAnswered || d.Reason != "nothing changed." || len(d.Files) != 0 || d.Commit != "" {
			t.Fatalf("exit %d, done %+v\nstderr:\n%s", code, d, stderr)
		}
		read := false
		for _, ev := range evs {
			if ev.Type == agent.EventToolResult && ev.Tool != nil && ev.Tool.Name == "fs.read" && ev.Tool.OK {
				read = true
			}
		}
		if !read {
			t.Fatalf("the model's fs.read did not run:\n%s", out)
		}
		// Both turns asked, no third: the answer was not nudged.
		if got := recordedTurns(t, rec); got != 2 {
			t.Fatalf("%d turns asked, want 2\nstderr:\n%s", got, stderr)
		}
	})
}

// TestOneShotRedChangeIsNudged: a model that stops talking with a change
// proposed (a test written, never green) is still nudged twice and the
// task stops, exit 3.
func TestOneShotRedChangeIsNudged(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	code, out, stderr := oneShot(t, fluffy, "../../examples/cassettes/parseconfig-stops-red.jsonl", "--json", "--l1", "none", "--record", rec, "add error handling to parseConfig")
	evs := jsonEvents(t, out)
	d := evs[len(evs)-1].Done
	if code != 3 || d.Status != agent.StatusStopped || !strings.Contains(d.Reason, "stopped working") {
		t.Fatalf("exit %d, done %+v\nstderr:\n%s", code, d, stderr)
	}
	// Turns 3, 4 and 5 are text: the first two were each followed by a nudge.
	if got := recordedTurns(t, rec); got != 5 {
		t.Fatalf("%d turns asked, want 5 (two nudges)\nstderr:\n%s", got, stderr)
	}
}

func recordedTurns(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cassette.Parse(strings.NewReader(string(data)))
	if err != nil {
		t.Fatalf("the recording is not a cassette: %v", err)
	}
	return len(c.Turns)
}
