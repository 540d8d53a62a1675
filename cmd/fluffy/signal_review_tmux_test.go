package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"path/filepath"
)

// A kernel whose task waits for a review that nobody will answer (the
// terminal that started it is gone; the task goes on for `fluffy
// attach`) still exits on SIGTERM: the signal cancels the task, so the
// server's wait for that connection ends. Before, it hung for good.
func TestSignalEndsAKernelWaitingForAReview(t *testing.T) {
	fluffy, home, ws := reviewProject(t)
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter, "NO_COLOR=1"}, fluffy, "--l1", "none")
	s.wait(2*time.Minute, "the prompt", func(sc string) bool { return strings.Contains(sc, "[strict] [idle] >") })
	s.send("/explore", "Enter")
	s.wait(time.Minute, "explore mode", func(sc string) bool { return strings.Contains(sc, "[explore] [idle] >") })
	s.send("write the notes", "Enter")
	s.wait(4*time.Minute, "the tool review", func(sc string) bool { return strings.Contains(sc, "review> ") })
	// The person closes the terminal; the task keeps waiting.
	if out, err := exec.Command("tmux", "kill-session", "-t", s.name).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err := exec.Command("pgrep", "-f", "kernel --project "+ws).Output()
	pids := strings.Fields(string(out))
	if err != nil || len(pids) != 1 {
		t.Fatalf("the project's kernel: pgrep %v %q", err, out)
	}
	pid, _ := strconv.Atoi(pids[0])
	time.Sleep(time.Second) // the kernel has seen its client go
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the kernel did not exit within 60 s of SIGTERM while its task waited for a review")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An interrupt that reaches the shell outside a task (a Ctrl-C pressed as
// a task ends, before the prompt is drawn) does not kill it: the shell is
// still at its prompt and leaves normally afterwards.
func TestInterruptDoesNotEndTheShell(t *testing.T) {
	fluffy, home, ws := reviewProject(t)
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "NO_COLOR=1"}, fluffy, "--l1", "none", "--project", ws)
	s.wait(2*time.Minute, "the prompt", func(sc string) bool { return strings.Contains(sc, "[strict] [idle] >") })
	// The shell's own process, not the sh or tmux whose command lines name
	// it too.
	out, err := exec.Command("pgrep", "-f", "--", "--l1 none --project "+ws).Output()
	var pid int
	for _, f := range strings.Fields(string(out)) {
		if exe, _ := os.Readlink("/proc/" + f + "/exe"); exe == fluffy {
			pid, _ = strconv.Atoi(f)
		}
	}
	if err != nil || pid == 0 {
		t.Fatalf("the shell's process: pgrep %v %q", err, out)
	}
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if sc := s.screen(); strings.Contains(sc, "FLUFFY-EXITED-") || syscall.Kill(pid, 0) != nil {
		t.Fatalf("an interrupt outside a task ended the shell:\n%s", sc)
	}
	s.send("/exit", "Enter")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-0") })
}
