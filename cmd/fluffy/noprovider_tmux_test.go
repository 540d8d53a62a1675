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
// state (not "[-] [-]"), the banner says in two lines what fluffy found and
// which providers there are (with their keys and `fluffy init`), and
// /status says why no task can run yet.
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
	for _, want := range []string{"new here: no go.mod, pyproject.toml", "strict mode: a failing test first",
		"no provider yet: openai (OPENAI_API_KEY), anthropic (ANTHROPIC_API_KEY), ollama", "run `fluffy init`"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("the first-run banner does not say %q:\n%s", want, sc)
		}
	}
	s.send("/status", "Enter")
	s.wait(time.Minute, "/status saying why no task can run", func(sc string) bool {
		j := strings.ReplaceAll(sc, "\n", "")
		return strings.Contains(j, "! no task can run yet: no AI provider is configured") && strings.Contains(j, "fluffy init")
	})
	s.send("/exit", "Enter")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-0") })
}
