package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREPLWithoutProviderSaysWhy: a newcomer runs `fluffy` in a project with
// no configuration at all. The prompt still shows the session's mode and
// state (not "[-] [-]"), and the banner says, before anything is typed, that
// no task can run yet and how to configure a provider.
func TestREPLWithoutProviderSaysWhy(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t)
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws, err := os.MkdirTemp("", "fws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		_ = stop.Run()
	})
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter, "NO_COLOR=1"}, fluffy, "--l1", "none")
	sc := s.wait(2*time.Minute, "the prompt", func(sc string) bool { return strings.Contains(sc, "] > ") })
	joined := strings.ReplaceAll(sc, "\n", "")
	if !strings.Contains(sc, "[strict] [idle] > ") {
		t.Fatalf("the prompt does not show the session's mode and state:\n%s", sc)
	}
	if !strings.Contains(joined, "! no task can run yet: no AI provider is configured") || !strings.Contains(joined, "fluffy config set provider") {
		t.Fatalf("the banner does not say why no task can run and how to fix it:\n%s", sc)
	}
	s.send("/status", "Enter")
	s.wait(time.Minute, "/status saying it too", func(sc string) bool {
		return strings.Count(strings.ReplaceAll(sc, "\n", ""), "! no task can run yet") >= 2
	})
	s.send("/exit", "Enter")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-0") })
}
