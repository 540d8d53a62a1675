package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
)

// dockerCLI is a CLI whose kernel runs plugins in L2 containers; it skips
// when Docker is absent (fails under FLUFFY_REQUIRE_DOCKER).
func dockerCLI(t *testing.T) *cli {
	t.Helper()
	if _, err := os.Stat("/var/run/docker.sock"); err != nil && os.Getenv("DOCKER_HOST") == "" {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but there is no Docker socket: %v", err)
		}
		t.Skip("Docker is not available")
	}
	c := newCLI(t)
	home, err := os.MkdirTemp("", "fh") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	t.Cleanup(func() { os.RemoveAll(home) })
	c.home = home
	c.vars["FLUFFY_RUNTIME_ADAPTER"] = testbin.Build(t, "builtin-plugins/runtime-docker")
	c.vars["DOCKER_HOST"] = os.Getenv("DOCKER_HOST")
	return c
}

// TestPluginCallIsJudged is the reproduction through the CLI:
// `fluffy plugin call tool-fs fs.read '{"path":".env"}'` must not print the
// secret that `policy explain` says is denied, a secret in an allowed file
// comes back redacted, and both calls are in the project's audit log.
func TestPluginCallIsJudged(t *testing.T) {
	c := dockerCLI(t)
	src := buildPlugin(t, "../../builtin-plugins/tool-fs", "../../builtin-plugins/tool-fs/plugin.yaml")
	search := buildPlugin(t, "../../builtin-plugins/tool-search", "../../builtin-plugins/tool-search/plugin.yaml")
	c.vars["FLUFFY_BUILTIN_PLUGINS"] = filepath.Dir(src) + string(os.PathListSeparator) + filepath.Dir(search)
	project := t.TempDir()
	os.Chmod(project, 0o755)
	const secret = "sk-proj0123456789abcdefXYZ"
	os.WriteFile(filepath.Join(project, ".env"), []byte("OPENAI_API_KEY="+secret+"\n"), 0o644)
	os.WriteFile(filepath.Join(project, "notes.txt"), []byte("key: "+secret+"\n"), 0o644)

	out, _, _ := c.run("policy", "explain", "--project", project, "--syscall", "fs.read", "--path", ".env", "--caller", "tool-fs")
	if !strings.Contains(out, "Decision: DENY") {
		t.Fatalf("explain: %s", out)
	}
	out, errOut, code := c.run("plugin", "call", "tool-fs", "fs.read", `{"path":".env"}`, "--project", project)
	if code != 1 || strings.Contains(out+errOut, secret) || !strings.Contains(errOut, "POLICY_DENIED") || !strings.Contains(errOut, "secrets-never-readable") {
		t.Fatalf(".env: code %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = c.run("plugin", "call", "tool-fs", "fs.read", `{"path":5}`, "--project", project)
	if code != 1 || !strings.Contains(errOut, "TOOL_ARGS_INVALID") {
		t.Fatalf("schema: code %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = c.run("plugin", "call", "tool-fs", "fs.read", `{"path":"notes.txt"}`, "--project", project)
	if code != 0 || strings.Contains(out, secret) || !strings.Contains(out, "sk-[REDACTED]") || !strings.Contains(errOut, "redacted") {
		t.Fatalf("notes: code %d\n%s\n%s", code, out, errOut)
	}
	// tool-search declares its path argument too: the root is searched
	// (the default "."), a secret file named as the path is refused.
	out, errOut, code = c.run("plugin", "call", "tool-search", "search.grep", `{"pattern":"key"}`, "--project", project)
	if code != 0 || !strings.Contains(out, "notes.txt") || strings.Contains(out, secret) {
		t.Fatalf("search.grep: code %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = c.run("plugin", "call", "tool-search", "search.grep", `{"pattern":"KEY","path":".env"}`, "--project", project)
	if code != 1 || !strings.Contains(errOut, "POLICY_DENIED") || strings.Contains(out+errOut, secret) {
		t.Fatalf("search.grep .env: code %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = c.run("audit", "log", "--project", project, "--type", "tool_execute,tool_result,syscall", "--json", "--limit", "0")
	if code != 0 {
		t.Fatalf("audit log: %s", errOut)
	}
	var execs, results, denied int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		switch {
		case r.EventType == audit.EventToolExecute:
			execs++
		case r.EventType == audit.EventToolResult:
			results++
		case r.EventType == audit.EventSyscall && r.Metadata["path"] == ".env" && r.PolicyDecision == audit.DecisionDenied:
			denied++
		}
		if strings.Contains(line, secret) {
			t.Fatalf("secret in the audit log: %s", line)
		}
	}
	if execs != 5 || results != 5 || denied != 2 {
		t.Fatalf("audit: %d tool_execute, %d tool_result, %d denied .env syscalls\n%s", execs, results, denied, out)
	}
}
