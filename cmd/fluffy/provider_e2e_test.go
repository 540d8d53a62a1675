package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/daemon"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// providerProject is a fresh git repository with a go.mod at its root and
// the given settings in its .fluffy/config.yaml.
func providerProject(t *testing.T, fluffy, home string, settings [][2]string) string {
	t.Helper()
	ws, err := os.MkdirTemp("", "fws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/x\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"}} {
		g := exec.Command("git", args...)
		g.Dir = ws
		if out, err := g.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	for _, kv := range settings {
		c := exec.Command(fluffy, "config", "set", "--project", kv[0], kv[1])
		c.Dir, c.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("config set %v: %v %s", kv, err, out)
		}
	}
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		_ = stop.Run()
	})
	return ws
}

// cleanEnv is the test's environment without any provider setting or key
// of the machine running it, plus extra.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") || k == "FLUFFY_PROVIDER" || k == "FLUFFY_MODEL" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// modelOf is the "model" of a request body.
func modelOf(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("request body: %v %.300s", err, body)
	}
	return b.Model
}

// TestTaskRunsOnTheProviderItNames: the project's config names openai; a
// task with --provider anthropic --model M runs on anthropic with model M,
// on the same running kernel (no restart), with the key of the shell that
// typed it (the kernel was started without one). A task naming a provider
// whose key is missing fails before any request, naming the variable.
func TestTaskRunsOnTheProviderItNames(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t, "provider-openai", "provider-anthropic")
	home := shortHome(t)
	oa, an := pt.New(), pt.New()
	defer oa.Close()
	defer an.Close()
	oa.Play(pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("hi"), pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(19, 3, 0, 0), pt.OpenAIDone))
	an.Play(pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "hi"), pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 2), pt.AnthropicStop))
	ws := providerProject(t, fluffy, home, [][2]string{
		{"provider", "openai"}, {"providers.openai.base_url", oa.URL() + "/v1"}, {"providers.openai.model", "cfg-openai-model"},
		{"agent.max_turns", "2"},
	})
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	const oaKey, anKey = "sk-test-openai-5f1c2a9e", "sk-ant-test-7d3b41c0"
	base := []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter, "FLUFFY_LOG_LEVEL=debug"}
	run := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(fluffy, append([]string{"--json", "--yes", "--l1", "none"}, args...)...)
		cmd.Dir, cmd.Env = ws, cleanEnv(append(base, env...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}
	kernelPID := func() string {
		b, err := os.ReadFile(daemon.PathsFor(home, ws).Lock)
		if err != nil {
			t.Fatalf("the kernel's lock file: %v", err)
		}
		return strings.TrimSpace(string(b))
	}

	// 1. The configured provider: the kernel starts with openai's key only.
	out, errOut, code := run([]string{"OPENAI_API_KEY=" + oaKey}, "say hi")
	if n := len(oa.Requests()); n == 0 || strings.Contains(errOut, "TASK_NO_PROVIDER") {
		t.Fatalf("openai got %d requests; exit %d\nstdout:\n%s\nstderr:\n%s", n, code, out, errOut)
	}
	if m := modelOf(t, oa.Requests()[0].Body); m != "cfg-openai-model" {
		t.Fatalf("openai was asked for model %q, want the configured cfg-openai-model", m)
	}
	pid := kernelPID()
	oaSeen := len(oa.Requests())

	// 2. --provider/--model on the command line win over the config, on
	// the same kernel, with the key of this shell.
	out, errOut, code = run([]string{"ANTHROPIC_API_KEY=" + anKey, "ANTHROPIC_BASE_URL=" + an.URL()}, "--provider", "anthropic", "--model", "claude-from-flag", "say hi")
	reqs := an.Requests()
	if len(reqs) == 0 {
		t.Fatalf("anthropic got no request; exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if m := modelOf(t, reqs[0].Body); m != "claude-from-flag" {
		t.Fatalf("anthropic was asked for model %q, want claude-from-flag", m)
	}
	if got := reqs[0].Header.Get("X-Api-Key"); got != anKey {
		t.Fatalf("anthropic got key %q, want the one of the shell that ran the task", got)
	}
	if n := len(oa.Requests()); n != oaSeen {
		t.Fatalf("openai got %d more requests during the anthropic task", n-oaSeen)
	}
	if p := kernelPID(); p != pid {
		t.Fatalf("the kernel was restarted (pid %s, then %s): the switch must happen on the running kernel", pid, p)
	}

	// 3. FLUFFY_PROVIDER also beats the config.
	anSeen := len(an.Requests())
	_, errOut, code = run([]string{"FLUFFY_PROVIDER=anthropic", "ANTHROPIC_API_KEY=" + anKey, "ANTHROPIC_BASE_URL=" + an.URL()}, "say hi")
	if len(an.Requests()) == anSeen || len(oa.Requests()) != oaSeen {
		t.Fatalf("FLUFFY_PROVIDER=anthropic: anthropic %d → %d requests, openai %d → %d; exit %d\n%s", anSeen, len(an.Requests()), oaSeen, len(oa.Requests()), code, errOut)
	}
	if m := modelOf(t, an.Requests()[anSeen].Body); m != "claude-sonnet-4-5" {
		t.Fatalf("FLUFFY_PROVIDER=anthropic asked for model %q, want anthropic's default (openai's configured model must not follow)", m)
	}

	// 4. A provider without a key: nothing is sent, the variable is named.
	anSeen = len(an.Requests())
	_, errOut, code = run([]string{"ANTHROPIC_BASE_URL=" + an.URL()}, "--provider", "anthropic", "say hi")
	if code != 1 || !strings.Contains(errOut, "ANTHROPIC_API_KEY") || !strings.Contains(errOut, "PROVIDER_NO_KEY") {
		t.Fatalf("missing key: exit %d\n%s", code, errOut)
	}
	if n := len(an.Requests()); n != anSeen {
		t.Fatalf("anthropic got %d request(s) from a task without a key", n-anSeen)
	}

	// The keys are in no log and no audit record.
	stop := exec.Command(fluffy, "kernel", "stop")
	stop.Dir, stop.Env = ws, cleanEnv(base...)
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("kernel stop: %v %s", err, out)
	}
	exp := exec.Command(fluffy, "audit", "export")
	exp.Dir, exp.Env = ws, cleanEnv(base...)
	audit, err := exp.CombinedOutput()
	if err != nil || len(audit) == 0 {
		t.Fatalf("audit export: %v %s", err, audit)
	}
	klog, err := os.ReadFile(daemon.PathsFor(home, ws).Log)
	if err != nil || !strings.Contains(string(klog), "provider configured for the task") {
		t.Fatalf("the kernel log (at debug level) does not show the switch: %v\n%.2000s", err, klog)
	}
	texts := map[string][]byte{"audit export": audit, "kernel log": klog}
	for name, b := range texts {
		for _, k := range []string{oaKey, anKey} {
			if strings.Contains(string(b), k) {
				t.Fatalf("%s holds an API key", name)
			}
		}
	}
}
