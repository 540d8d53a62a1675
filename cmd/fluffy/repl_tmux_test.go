package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxSession drives fluffy in a real terminal: tmux runs it, send-keys
// types, capture-pane reads the screen.
type tmuxSession struct {
	t    *testing.T
	name string
}

func newTmux(t *testing.T, dir string, env []string, argv ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("tmux is not installed")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &tmuxSession{t: t, name: "fluffy-test-" + hex.EncodeToString(b[:])}
	shell := "cd " + dir + " && env " + strings.Join(env, " ") + " " + strings.Join(argv, " ") + "; echo FLUFFY-EXITED-$?; sleep 600"
	cmd := exec.Command("tmux", "new-session", "-d", "-s", s.name, "-x", "160", "-y", "50", shell)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", s.name).Run() })
	return s
}

func (s *tmuxSession) screen() string {
	out, _ := exec.Command("tmux", "capture-pane", "-p", "-J", "-S", "-2000", "-t", s.name).Output()
	return string(out)
}

func (s *tmuxSession) send(keys ...string) {
	s.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"send-keys", "-t", s.name}, keys...)...).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys: %v %s", err, out)
	}
}

// wait returns the screen once cond holds, failing after d.
func (s *tmuxSession) wait(d time.Duration, what string, cond func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		sc := s.screen()
		if cond(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("waited %s for %s; the screen shows:\n%s", d, what, sc)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestREPLRunsATaskInATerminal is the REPL as a person uses it: fluffy
// starts, the prompt shows mode and state, Tab completes a slash command
// and a project path, a typed task runs to a commit
// with its tool calls and state changes on screen, /status answers, /exit
// leaves with status 0.
func TestREPLRunsATaskInATerminal(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws := demoProject(t, fluffy, home, "../../examples/cassettes/parseconfig.jsonl")
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		_ = stop.Run()
	})
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter, "NO_COLOR=1"}, fluffy, "--l1", "none")
	s.wait(2*time.Minute, "the prompt", func(sc string) bool { return strings.Contains(sc, "[strict] [idle] >") })
	// Tab completes slash commands and project paths (Ctrl-U clears the
	// line again).
	s.send("/sta", "Tab")
	s.wait(30*time.Second, "/sta to complete to /status", func(sc string) bool { return strings.Contains(sc, "[strict] [idle] > /status") })
	s.send("C-u")
	s.send("look at src/ma", "Tab")
	s.wait(30*time.Second, "src/ma to complete to the project's src/main.go", func(sc string) bool {
		return strings.Contains(sc, "> look at src/main.go")
	})
	s.send("C-u")
	s.send("add error handling to parseConfig", "Enter")
	sc := s.wait(8*time.Minute, "the task to finish", func(sc string) bool {
		return strings.Contains(sc, "Done.") || strings.Contains(sc, "Failed:") || strings.Contains(sc, "Stopped:")
	})
	for _, want := range []string{"fs.write", "test.run", "committed", "Done."} {
		if !strings.Contains(sc, want) {
			t.Fatalf("the screen does not show %q:\n%s", want, sc)
		}
	}
	s.wait(time.Minute, "the prompt again", func(sc string) bool { return strings.Count(sc, "[strict] [idle] >") >= 2 })
	s.send("/status", "Enter")
	s.wait(time.Minute, "/status", func(sc string) bool { return strings.Contains(sc, "writable") || strings.Contains(sc, "Writable") })
	s.send("/exit", "Enter")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-0") })
	g := exec.Command("git", "log", "--oneline")
	g.Dir = ws
	log, _ := g.Output()
	if len(strings.Split(strings.TrimSpace(string(log)), "\n")) != 2 {
		t.Fatalf("want the task's commit on top:\n%s", log)
	}
}

// TestREPLCancelThenReview: Ctrl-C during a test run cancels the running
// task (the session stays where it was), "continue" picks it up, and a
// merge over merge.auto_max_lines is shown as a coloured diff for review;
// /approve merges and commits it.
func TestREPLCancelThenReview(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws := demoProject(t, fluffy, home, "../../examples/cassettes/parseconfig-cancel.jsonl")
	set := exec.Command(fluffy, "config", "set", "--project", "merge.auto_max_lines", "10")
	set.Dir, set.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		_ = stop.Run()
	})
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter}, fluffy, "--l1", "none")
	s.wait(2*time.Minute, "the prompt", func(sc string) bool { return strings.Contains(sc, "[strict] [idle] >") })
	s.send("add error handling to parseConfig", "Enter")
	s.wait(4*time.Minute, "the first test run", func(sc string) bool {
		i := strings.Index(sc, "fs.write src/config_errors_test.go")
		return i >= 0 && strings.Contains(sc[i:], "test.run")
	})
	s.send("C-c")
	s.wait(time.Minute, "the cancellation", func(sc string) bool { return strings.Contains(sc, "Cancelled.") })
	s.wait(time.Minute, "the prompt in test_writing", func(sc string) bool { return strings.Contains(sc, "[strict] [test_writing] >") })
	s.send("continue", "Enter")
	sc := s.wait(8*time.Minute, "the merge review", func(sc string) bool { return strings.Contains(sc, "review> ") })
	for _, want := range []string{"Review (merge)", "src/config.go", "/approve to merge all"} {
		if !strings.Contains(sc, want) {
			t.Fatalf("the review does not show %q:\n%s", want, sc)
		}
	}
	added := false
	for _, l := range strings.Split(sc, "\n") {
		if strings.HasPrefix(l, "+") && strings.Contains(l, "default:") {
			added = true
		}
	}
	if !added {
		t.Fatalf("the review does not show the diff's added lines:\n%s", sc)
	}
	// capture-pane -e keeps the colours: added lines are green.
	out, _ := exec.Command("tmux", "capture-pane", "-p", "-e", "-J", "-S", "-2000", "-t", s.name).Output()
	if !strings.Contains(string(out), "\x1b[32m+") {
		t.Fatalf("the diff's added lines are not green:\n%q", out)
	}
	s.send("/approve", "Enter")
	sc = s.wait(3*time.Minute, "the merge", func(sc string) bool { return strings.Contains(sc, "Done.") || strings.Contains(sc, "Failed:") })
	if !strings.Contains(sc, "committed") {
		t.Fatalf("approved, but no commit:\n%s", sc)
	}
	s.send("C-d")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-0") })
}
