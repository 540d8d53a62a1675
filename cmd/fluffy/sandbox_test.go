package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/policy"
)

const fixtureManifest = `name: fixture
version: 1.0.0
kind: tool
description: "misbehaving test plugin"
author: tests
entry: fixture
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
tags: [third_party]
tools:
  - name: fx.sleep
    summary: "sleep until cancelled"
    parameters: {type: object}
  - name: fx.echo
    summary: "echo"
    parameters: {type: object}
`

// TestKilledCLILeavesNoSandboxBehind runs the real fluffy binary: a tool
// call runs inside an L2 container, the fluffy process is SIGKILLed
// mid-call, and `fluffy sandbox ls`/`gc` then show and remove whatever is
// left, until nothing of that kernel remains.
func TestKilledCLILeavesNoSandboxBehind(t *testing.T) {
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
	t.Cleanup(func() { os.RemoveAll(home) })
	c.home = home
	c.vars["FLUFFY_RUNTIME_ADAPTER"] = testbin.Build(t, "builtin-plugins/runtime-docker")
	c.vars["DOCKER_HOST"] = os.Getenv("DOCKER_HOST")
	fluffy := testbin.Build(t, "cmd/fluffy")

	mf := filepath.Join(t.TempDir(), "plugin.yaml")
	os.WriteFile(mf, []byte(fixtureManifest), 0o644)
	src := buildPlugin(t, "../../internal/fixtures/tool-misbehave", mf)
	// The fixture offers tools its manifest does not declare, so certification
	// fails; --force installs it anyway (recorded as forced).
	if _, errOut, code := c.run("plugin", "install", src, "--yes", "--force"); code != 0 {
		t.Fatal(errOut)
	}

	project := t.TempDir()
	allowFixture(t, c, project)
	cmd := exec.Command(fluffy, "plugin", "call", "fixture", "fx.sleep", `{}`, "--project", project)
	cmd.Env = append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_RUNTIME_ADAPTER="+c.vars["FLUFFY_RUNTIME_ADAPTER"])
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the call is running inside its container.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "starting fixture") || !containerListed(c) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("plugin never started in a container; fluffy said:\n%s", stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("running:\n%s", mustLs(c))
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	// Its kernel is gone: within 5 s the container has stopped by itself,
	// and it is listed as an orphan until gc removes it.
	killed := time.Now()
	var out string
	for {
		var errOut string
		var code int
		out, errOut, code = c.run("sandbox", "ls")
		if code != 0 {
			t.Fatalf("ls: %s", errOut)
		}
		// Only this home's resources: other kernels (parallel test runs on a
		// shared engine) have containers of their own.
		mineRunning := false
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " this home ") && strings.Contains(l, " running ") {
				mineRunning = true
			}
		}
		if !mineRunning {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("plugin container still running 5 s after its kernel was killed:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("after SIGKILL:\n%s", out)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "fixture") && strings.Contains(l, " this home ") && !strings.HasSuffix(strings.TrimSpace(l), "true") {
			t.Fatalf("after the kernel died its sandbox is not marked orphan: %s", l)
		}
	}
	if _, errOut, code := c.run("sandbox", "gc"); code != 0 {
		t.Fatalf("gc: %s", errOut)
	}
	out, _, _ = c.run("sandbox", "ls", "--orphans")
	if mineWith(out, "fixture") {
		t.Fatalf("gc left orphans of this home:\n%s", out)
	}
}

// allowFixture gives project a policy that lets the fixture plugin's tools
// (which take no path arguments) run: the default policy denies every
// pathless tool no rule names. The file is trusted the way a person does
// it (`fluffy policy trust --yes`), or the default would apply.
func allowFixture(t *testing.T, c *cli, project string) {
	t.Helper()
	os.MkdirAll(filepath.Join(project, ".fluffy"), 0o755)
	src := string(policy.DefaultYAML()) + "\n  - name: fixture-tools\n    match: { syscall: \"fx.*\", plugin: fixture }\n    action: allow\n"
	if err := os.WriteFile(filepath.Join(project, ".fluffy", "policy.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := c.run("policy", "trust", "--yes", "--project", project); code != 0 {
		t.Fatalf("policy trust: %s", errOut)
	}
}

func containerListed(c *cli) bool {
	out, _, code := c.run("sandbox", "ls")
	return code == 0 && mineWith(out, "fixture", " running ")
}

// mineWith reports whether a `sandbox ls` row of this home holds every
// word: other kernels on the shared engine list rows of their own.
func mineWith(out string, words ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		ok := strings.Contains(l, " this home ")
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

func mustLs(c *cli) string {
	out, _, _ := c.run("sandbox", "ls")
	return out
}
