package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
)

// TestThreeProjectsOneHomeInParallel runs a whole task in each of three
// projects at once, all on one $FLUFFY_HOME, through the real binary: two
// kernels as local processes (--l1 none) and one in its L1 container. A
// kernel used to hold the home database for its life, so every project
// after the first failed with KERNEL_START_FAILED (STORE_LOCKED). While
// the kernels still run, `fluffy plugin disable/enable/list` work, and
// afterwards the home audit log, written by all of them, is one intact
// chain.
func TestThreeProjectsOneHomeInParallel(t *testing.T) {
	needDockerCLI(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("needs git")
	}
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	home := shortHome(t)
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	env := append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_RUNTIME_ADAPTER="+adapter)
	l1s := []string{"none", "none", "docker"}
	projects := make([]string, len(l1s))
	for i := range l1s {
		projects[i] = demoProject(t, fluffy, home, "../../examples/cassettes/parseconfig.jsonl")
		ws := projects[i]
		t.Cleanup(func() {
			stop := exec.Command(fluffy, "kernel", "stop")
			stop.Dir, stop.Env = ws, env
			_ = stop.Run()
		})
	}
	type result struct {
		code         int
		last         agent.Event
		stderr, fail string
	}
	res := make([]result, len(l1s))
	var wg sync.WaitGroup
	for i, l1 := range l1s {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(fluffy, "--json", "--yes", "--l1", l1, "add error handling to parseConfig")
			cmd.Dir, cmd.Env = projects[i], env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			r := &res[i]
			r.stderr = stderr.String()
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			} else if err != nil {
				r.fail = err.Error()
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			sc.Buffer(make([]byte, 1<<20), 8<<20)
			for sc.Scan() {
				var ev agent.Event
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					r.fail = fmt.Sprintf("stdout line is not a JSON event: %q", sc.Text())
					return
				}
				r.last = ev
			}
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.fail != "" || r.code != 0 || r.last.Type != agent.EventDone || r.last.Done == nil || r.last.Done.Status != agent.StatusDone {
			t.Errorf("project %d (--l1 %s): exit %d %s, last event %+v (done %+v)\nstderr:\n%s", i+1, l1s[i], r.code, r.fail, r.last, r.last.Done, r.stderr)
			continue
		}
		g := exec.Command("git", "log", "--format=%s")
		g.Dir = projects[i]
		log, _ := g.Output()
		if lines := strings.Split(strings.TrimSpace(string(log)), "\n"); len(lines) != 2 {
			t.Errorf("project %d: want the task's commit on top of the first:\n%s", i+1, log)
		}
	}
	if t.Failed() {
		return
	}

	// The kernels idle on; the plugin CLI works beside them.
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(fluffy, args...)
		c.Dir, c.Env = projects[0], env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("fluffy %s while the kernels run: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("plugin", "disable", "vcs-git", "--reason", "testing the CLI beside running kernels")
	if out := run("plugin", "list"); !strings.Contains(out, "disabled") {
		t.Fatalf("plugin list after disable:\n%s", out)
	}
	run("plugin", "enable", "vcs-git")
	for i, ws := range projects {
		st := exec.Command(fluffy, "kernel", "status")
		st.Dir, st.Env = ws, env
		if out, err := st.CombinedOutput(); err != nil {
			t.Fatalf("project %d's kernel is gone after the CLI used the home: %v\n%s", i+1, err, out)
		}
	}
	for _, ws := range projects {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, env
		if out, err := stop.CombinedOutput(); err != nil {
			t.Fatalf("kernel stop: %v\n%s", err, out)
		}
	}
	l, err := audit.Open(t.Context(), audit.Options{Dir: kernel.HomeDB(home)})
	if err != nil {
		t.Fatalf("home audit log: %v", err)
	}
	defer l.Close()
	if rep, err := l.Verify(t.Context(), true); err != nil || !rep.OK() {
		t.Fatalf("home audit chain after three kernels and the CLI: %v %+v", err, rep)
	}
	for _, typ := range []audit.EventType{"plugin_disable", "plugin_enable"} {
		if recs, err := l.Recent(t.Context(), 1, typ); err != nil || len(recs) != 1 {
			t.Fatalf("%s not in the home audit log: %v", typ, err)
		}
	}
}
