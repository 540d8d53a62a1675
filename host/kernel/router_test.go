package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/policy"
)

const routerFixtureManifest = `name: fixture
version: 1.0.0
kind: tool
description: "misbehaving test plugin"
author: tests
entry: fixture
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
tags: [third_party]
tools:
  - name: fx.echo
    summary: "echo the arguments"
    parameters: {type: object}
  - name: fx.flood
    summary: "return an output of the given size"
    parameters: {type: object, properties: {bytes: {type: integer, minimum: 0}}, required: [bytes]}
  - name: fx.panic
    summary: "panic inside the call"
    parameters: {type: object}
  - name: fx.exit
    summary: "exit inside the call"
    parameters: {type: object}
`

// routerPolicy is the default policy plus the fixture's tools and a user
// sanitize pattern.
func routerPolicy(t *testing.T) *policy.Engine {
	t.Helper()
	src := string(policy.DefaultYAML()) + `
  - name: fixture-tools
    match: { syscall: "fx.*", plugin: fixture }
    action: allow
sanitize:
  patterns:
    - {name: internal-token, regex: 'itk_[a-z0-9]{12,}'}
`
	p, err := policy.Load("router-test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return policy.NewEngine(p, policy.Options{})
}

// openDockerKernel opens a kernel whose plugins run in L2 containers.
func openDockerKernel(t *testing.T, ws string, o Options) *Kernel {
	t.Helper()
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	t.Cleanup(func() { os.RemoveAll(home) })
	adapter := filepath.Join(t.TempDir(), "runtime-docker")
	testbin.Into(t, "builtin-plugins/runtime-docker", adapter)
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST")}
	o.Home, o.Workspace, o.Getenv = home, ws, func(k string) string { return env[k] }
	if o.Logger == nil {
		o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})
	}
	k, err := Open(context.Background(), o)
	if err != nil {
		if uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			t.Skipf("Docker is not available: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// installFixture builds internal/fixtures/tool-misbehave under the given manifest and
// installs and loads it.
func installFixture(t *testing.T, k *Kernel, manifest string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fixture")
	testbin.Into(t, "internal/fixtures/tool-misbehave", bin)
	sum, _ := manifests.FileSHA256(bin)
	stamped, err := manifests.StampSHA256([]byte(manifest), sum)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644)
	ctx := context.Background()
	if _, err := k.Registry.Install(ctx, dir, registry.InstallOptions{Yes: true}); err != nil {
		t.Fatal(err)
	}
	spec, err := k.Registry.Runnable("fixture")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Plugins.Add(spec); err != nil {
		t.Fatal(err)
	}
}

// callRecords returns the audit records of one call, oldest first.
func callRecords(t *testing.T, k *Kernel, callID string) []audit.Record {
	t.Helper()
	recs, err := k.Audit.Query(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, r := range recs {
		if r.Metadata[router.MetaCallID] == callID {
			out = append(out, r)
		}
	}
	return out
}

func types(recs []audit.Record) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.EventType))
	}
	return strings.Join(s, ",")
}

// TestToolCallsAreJudged end to end: real tool-fs and a
// hostile fixture plugin in L2 containers, every call through the kernel's
// router. A secret the policy denies is never read, bad arguments never
// reach the plugin, an oversize output is refused, secrets in outputs are
// redacted (the audit log keeps the hash of the original), and every call —
// refused, crashed or fine — leaves tool_execute and tool_result records.
func TestToolCallsAreJudged(t *testing.T) {
	ws := t.TempDir()
	os.Chmod(ws, 0o755)
	const secret = "sk-live0123456789abcdefABCDEF"
	os.WriteFile(filepath.Join(ws, ".env"), []byte("OPENAI_API_KEY="+secret+"\n"), 0o644)
	notes := "deploy key " + secret + "\ninternal itk_abcdef0123456789 here\n"
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte(notes), 0o644)
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.WriteFile(filepath.Join(ws, "src", "a.go"), []byte("package a\n"), 0o644)

	k := openDockerKernel(t, ws, Options{Policy: routerPolicy(t), BuiltinDirs: []string{filepath.Dir(stage(t))}})
	installFixture(t, k, routerFixtureManifest)
	ctx := context.Background()
	sess := &router.Session{ID: "s1", Mode: "explore", Caller: "user"}
	call := func(plugin, tl, args string) router.Result {
		return k.Router.Call(ctx, sess, router.Call{Plugin: plugin, Tool: tl, Args: json.RawMessage(args)})
	}
	running := func(p string) bool {
		st, err := k.Plugins.Stats(p)
		return err == nil && st.Running
	}

	// Refused before the plugin ever starts: it is started lazily, so a
	// plugin that is still not running never saw the call.
	envRes := call("tool-fs", "fs.read", `{"path":".env"}`)
	if envRes.Err == nil || envRes.Err.Code != router.CodePolicyDenied || envRes.Stage != router.StagePolicy || strings.Contains(string(envRes.Output), secret) {
		t.Fatalf(".env read: %+v", envRes)
	}
	badArgs := call("tool-fs", "fs.read", `{"path":5}`)
	if badArgs.Err == nil || badArgs.Err.Code != router.CodeArgsInvalid || badArgs.Stage != router.StageSchema || !strings.Contains(badArgs.Err.Why, "/path") {
		t.Fatalf("schema violation: %+v", badArgs)
	}
	if running("tool-fs") {
		t.Fatal("tool-fs was started for calls the kernel refused")
	}

	// Allowed, and redacted: the built-in sk- prefix and the policy's pattern.
	read := call("tool-fs", "fs.read", `{"path":"notes.txt"}`)
	if read.Err != nil || !read.OK || !running("tool-fs") {
		t.Fatalf("notes read: %+v", read)
	}
	if strings.Contains(string(read.Output), secret) || strings.Contains(string(read.Output), "itk_abcdef") ||
		!strings.Contains(string(read.Output), "[REDACTED:internal-token]") || !strings.Contains(string(read.Output), "sk-[REDACTED]") || read.Redactions < 2 {
		t.Fatalf("output not redacted: %s (%d)", read.Output, read.Redactions)
	}
	// The audit log keeps the hash of what the plugin really returned:
	// tool-fs's readResult, marshalled exactly as the plugin does.
	fileSum := sha256.Sum256([]byte(notes))
	var numbered strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(notes, "\n"), "\n") {
		fmt.Fprintf(&numbered, "%6d\t%s\n", i+1, l)
	}
	orig, _ := json.Marshal(struct {
		Path       string `json:"path"`
		Content    string `json:"content"`
		SHA256     string `json:"sha256"`
		Size       int64  `json:"size"`
		TotalLines int    `json:"total_lines"`
		StartLine  int    `json:"start_line"`
		EndLine    int    `json:"end_line"`
		More       bool   `json:"more"`
		Truncated  bool   `json:"truncated"`
	}{"notes.txt", numbered.String(), hex.EncodeToString(fileSum[:]), int64(len(notes)), 2, 1, 2, false, false})
	origSum := sha256.Sum256(orig)
	recs := callRecords(t, k, read.CallID)
	last := recs[len(recs)-1]
	if last.EventType != audit.EventToolResult || last.Metadata[router.MetaOutputSHA256] != hex.EncodeToString(origSum[:]) ||
		last.Metadata[router.MetaSanitizedSHA256] == last.Metadata[router.MetaOutputSHA256] || strings.Contains(last.OutputSummary, secret) {
		t.Fatalf("audit of the redacted read: %+v", last)
	}

	// Root listing is judged too (fs.list of ".").
	if l := call("tool-fs", "fs.list", `{}`); l.Err != nil {
		t.Fatalf("root listing: %+v", l.Err)
	}
	// Oversize output: refused by the kernel, not passed on.
	flood := call("fixture", "fx.flood", `{"bytes":3000000}`)
	if flood.Err == nil || flood.Err.Code != router.CodeOutputTooLarge || len(flood.Output) != 0 {
		t.Fatalf("oversize output: %+v", flood.Err)
	}

	// Hostile calls: each leaves exactly one tool_execute and one
	// tool_result, whatever happens to it.
	hostile := []struct{ plugin, tool, args, code string }{
		{"tool-fs", "fs.read", `{"path":".env"}`, router.CodePolicyDenied},
		{"tool-fs", "fs.read", `{"path":"../../etc/passwd"}`, router.CodePolicyDenied},
		{"tool-fs", "fs.read", `{"path":"/etc/shadow"}`, router.CodePolicyDenied},
		{"tool-fs", "fs.read", `{"path":"a\u0000b"}`, router.CodePolicyDenied},
		{"tool-fs", "fs.read", `{"path":"deploy/id_rsa"}`, router.CodePolicyDenied},
		{"tool-fs", "fs.read", `{"path":5}`, router.CodeArgsInvalid},
		{"tool-fs", "fs.read", `{"path":"a","extra":1}`, router.CodeArgsInvalid},
		{"tool-fs", "fs.read", `{`, router.CodeArgsInvalid},
		{"tool-fs", "fs.read", `{"path":"` + strings.Repeat("a", 3<<20) + `"}`, router.CodeArgsTooLarge},
		{"tool-fs", "fs.nope", `{}`, router.CodeUnknownTool},
		{"nope", "fs.read", `{}`, "PLUGIN_UNKNOWN"},
		{"tool-fs", "fs.write", `{"path":".fluffy/policy.yaml","content":"mode: observe"}`, router.CodePolicyDenied},
		{"tool-fs", "fs.write", `{"path":"go.mod","content":"module x"}`, router.CodeReviewRequired},
		{"fixture", "fx.flood", `{"bytes":3000000}`, router.CodeOutputTooLarge},
		{"fixture", "fx.flood", `{"bytes":"many"}`, router.CodeArgsInvalid},
		{"fixture", "fx.panic", `{}`, "PLUGIN_CRASHED"},
		{"fixture", "fx.exit", `{}`, "PLUGIN_CRASHED"},
		{"fixture", "fx.echo", `{"leak":"` + secret + `"}`, ""},
	}
	for _, h := range hostile {
		res := call(h.plugin, h.tool, h.args)
		code := ""
		if res.Err != nil {
			code = res.Err.Code
		}
		if code != h.code {
			t.Errorf("%s %s %.60s: code %q, want %q (%v)", h.plugin, h.tool, h.args, code, h.code, res.Err)
		}
		if strings.Contains(string(res.Output), secret) {
			t.Errorf("%s %s: secret in output %s", h.plugin, h.tool, res.Output)
		}
		recs := callRecords(t, k, res.CallID)
		var exec, result int
		for _, r := range recs {
			switch r.EventType {
			case audit.EventToolExecute:
				exec++
			case audit.EventToolResult:
				result++
				if h.code != "" && r.Metadata[router.MetaErrorCode] != h.code {
					t.Errorf("%s %s: tool_result error_code %q", h.plugin, h.tool, r.Metadata[router.MetaErrorCode])
				}
			}
			if strings.Contains(r.InputSummary+r.OutputSummary+r.DenyReason, secret) {
				t.Errorf("%s %s: secret in audit record %s", h.plugin, h.tool, r.EventType)
			}
		}
		if exec != 1 || result != 1 {
			t.Errorf("%s %s %.40s: records %s", h.plugin, h.tool, h.args, types(recs))
		}
	}
	// The denied .env read left its syscall record: decision, rule, path.
	var sawDeny bool
	for _, r := range callRecords(t, k, envRes.CallID) {
		if r.EventType == audit.EventSyscall && r.SyscallType == "fs.read" && r.Metadata["path"] == ".env" &&
			r.PolicyDecision == audit.DecisionDenied && r.PolicyRuleName == "secrets-never-readable" && r.Caller == "tool-fs" {
			sawDeny = true
		}
	}
	if !sawDeny {
		t.Fatalf("no syscall record of the denied read: %s", types(callRecords(t, k, envRes.CallID)))
	}
	if rep, err := k.Audit.Verify(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("audit chain: %v %+v", err, rep)
	}
}
