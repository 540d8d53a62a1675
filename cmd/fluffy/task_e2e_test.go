package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// demoProject copies examples/parseconfig into a fresh git repository and
// points its config at the replay cassette (copied into .fluffy/, which the
// kernel reads and no plugin sees).
func demoProject(t *testing.T, fluffy, home, cassette string) string {
	t.Helper()
	ws := t.TempDir()
	cp := exec.Command("cp", "-r", "../../examples/parseconfig/.", ws)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"}} {
		g := exec.Command("git", args...)
		g.Dir = ws
		if out, err := g.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.MkdirAll(filepath.Join(ws, ".fluffy"), 0o755)
	data, err := os.ReadFile(cassette)
	if err != nil {
		t.Fatal(err)
	}
	cas := filepath.Join(ws, ".fluffy", "cassette.jsonl")
	os.WriteFile(cas, data, 0o644)
	for _, kv := range [][2]string{{"provider", "replay"}, {"providers.replay.cassette", cas}} {
		c := exec.Command(fluffy, "config", "set", "--project", kv[0], kv[1])
		c.Dir, c.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("config set %v: %v %s", kv, err, out)
		}
	}
	return ws
}

// TestOneShotTaskFromTheCLI runs `fluffy --json --yes "task"` as a script
// would (a local kernel process, plugins in L2 containers): the exit code
// is 0, stdout is JSON lines ending with done, and git has the commit.
func TestOneShotTaskFromTheCLI(t *testing.T) {
	needDockerCLI(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("needs git")
	}
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws := demoProject(t, fluffy, home, "../../examples/cassettes/parseconfig.jsonl")
	recFile := filepath.Join(t.TempDir(), "run.jsonl")
	cmd := exec.Command(fluffy, "--json", "--yes", "--l1", "none", "--record", recFile, "add error handling to parseConfig")
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
	var last agent.Event
	var results []string
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stdout line is not a JSON event: %q", sc.Text())
		}
		if ev.Type == agent.EventRecorded {
			t.Fatalf("a recorded turn reached stdout: %s", sc.Text())
		}
		if ev.Type == agent.EventToolResult && ev.Tool != nil {
			r := ev.Tool.Name + "=" + ev.Tool.TestStatus
			if ev.Tool.Error != nil {
				r += "!" + ev.Tool.Error.Code + ": " + ev.Tool.Error.What
			}
			results = append(results, r)
		}
		last, n = ev, n+1
	}
	if code != 0 || last.Type != agent.EventDone || last.Done == nil || last.Done.Status != agent.StatusDone {
		t.Fatalf("exit %d, %d events, last %+v (done %+v)\ntool results: %q\nstderr:\n%s", code, n, last, last.Done, results, stderr.String())
	}
	// --record wrote a private cassette holding the turns the model
	// (here the replayed one) answered, event for event.
	fi, err := os.Stat(recFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("recording: %v %v\nstderr:\n%s", fi, err, stderr.String())
	}
	recData, _ := os.ReadFile(recFile)
	got, err := cassette.Parse(strings.NewReader(string(recData)))
	if err != nil || !strings.HasPrefix(string(recData), "# recorded by fluffy") {
		t.Fatalf("the recording is not a cassette: %v\n%.500s", err, recData)
	}
	origData, _ := os.ReadFile("../../examples/cassettes/parseconfig.jsonl")
	orig, err := cassette.Parse(strings.NewReader(string(origData)))
	if err != nil {
		t.Fatal(err)
	}
	// The task ends when the workflow is done (green, merged): the
	// cassette's closing text turn may go unasked.
	if len(got.Turns) < 4 || len(got.Turns) > len(orig.Turns) || !strings.Contains(stderr.String(), fmt.Sprintf("recorded %d turn(s)", len(got.Turns))) {
		t.Fatalf("recorded %d turns of %d\nstderr:\n%s", len(got.Turns), len(orig.Turns), stderr.String())
	}
	for i := range got.Turns {
		if !reflect.DeepEqual(got.Turns[i].Events, orig.Turns[i].Events) || got.Turns[i].RequestSHA256 == "" {
			t.Fatalf("turn %d recorded differently:\n%+v\nwant\n%+v", i+1, got.Turns[i], orig.Turns[i].Events)
		}
	}
	g := exec.Command("git", "log", "--oneline")
	g.Dir = ws
	log, _ := g.Output()
	if len(strings.Split(strings.TrimSpace(string(log)), "\n")) != 2 {
		t.Fatalf("want the task's commit on top:\n%s", log)
	}
}
