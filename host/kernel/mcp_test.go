//go:build !race

package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/mcpconfig"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// mcpPlugins are the builtin plugins the MCP tests load.
var mcpPlugins = append([]string{"builtin-plugins/tool-mcp"}, taskPlugins...)

// mcpGoServer builds the tests' Go MCP server (on the SDK) into a
// directory of its own outside the project and home.
func mcpGoServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fluffy-mcp-srv")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "mcpserver")
	testbin.Into(t, "host/kernel/testdata/mcpserver", bin)
	return bin
}

// mcpPyServer copies the hand-written Python MCP server outside the
// project and home (it is mounted read-only at that path).
func mcpPyServer(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatal("the Python MCP server needs /usr/bin/python3 on the host (the policy's /usr toolchain)")
	}
	dir, err := os.MkdirTemp("", "fluffy-mcp-py")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, err := os.ReadFile("testdata/mcp_server.py")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "mcp_server.py")
	if err := os.WriteFile(p, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// mcpKernel opens a docker kernel on a git copy of src whose home lists
// the servers servers(home) returns (as `fluffy mcp add` stores them).
func mcpKernel(t *testing.T, src string, pol *policy.Engine, servers func(home string) []mcpconfig.Server, providerCfg []byte) (*kernel.Kernel, string, string) {
	t.Helper()
	ws := t.TempDir()
	copyTree(t, src, ws)
	git(t, ws, "init", "-q", "-b", "main")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "project")
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(home, 0o755)
	t.Cleanup(func() { os.RemoveAll(home) })
	st := mcpconfig.Store{Home: home, Project: ws}
	for _, s := range servers(home) {
		if err := st.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	var dirs []string
	for _, p := range mcpPlugins {
		dirs = append(dirs, kerneltest.Stage(t, p))
	}
	adapter := kerneltest.Build(t, "builtin-plugins/runtime-docker")
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST")}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})
	o := kernel.Options{Home: home, Workspace: ws, SessionID: "mcp", Logger: log, Policy: pol,
		Getenv: func(k string) string { return env[k] }, BuiltinDirs: []string{filepath.Dir(dirs[0])}, StartTimeout: 2 * time.Minute}
	if providerCfg != nil {
		o.PluginConfig = map[string][]byte{"provider-replay": providerCfg}
	}
	k, err := kernel.Open(context.Background(), o)
	if err != nil {
		if uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			t.Skipf("Docker is not available: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k, ws, home
}

// countingApprover approves every review and counts them per tool.
type countingApprover struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *countingApprover) Review(_ context.Context, r router.ReviewRequest) (router.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[r.Tool]++
	return router.Approval{Approved: true, Scope: router.ScopeOnce, By: "test"}, nil
}

// TestMCPServersThroughTheRouter runs a Go SDK server and a hand-written
// Python server through the bridge in docker sandboxes: their tools are
// listed with their schemas, calls go through the router (review, a
// policy deny, schema validation, the audit log), what the server can
// reach from its sandbox is measured, and a crash, a hang and a flood
// each fail one call and leave the server usable again.
func TestMCPServersThroughTheRouter(t *testing.T) {
	goSrv, pySrv := mcpGoServer(t), mcpPyServer(t)
	// A variable of the kernel's own process: the sandbox must not see it.
	t.Setenv("FLUFFY_MCP_HOST_CANARY", "host-canary-5521")
	t.Setenv("MCP_HOST_CANARY", "host-canary-5522")
	// A host service the network-enabled server may reach (through the
	// kernel's proxy), and the policy's opt-in for that server alone.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "pong-from-the-host")
			c.Close()
		}
	}()
	listed := ln.Addr().String()
	// A streamable HTTP server on the host, on the SDK.
	hs := mcp.NewServer(&mcp.Implementation{Name: "fixture-http", Version: "1.0.0"}, nil)
	type greetIn struct {
		Who string `json:"who"`
	}
	type greetOut struct {
		Greeting string `json:"greeting"`
	}
	mcp.AddTool(hs, &mcp.Tool{Name: "greet", Description: "Greet someone"}, func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
		return nil, greetOut{Greeting: "hello, " + in.Who + ", over HTTP"}, nil
	})
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return hs }, nil))
	defer web.Close()
	src := string(policy.DefaultYAML()) + `
  - name: mcp-forbidden
    match: { syscall: mcp.gosrv.forbidden }
    action: deny
    reason: "the tests deny this tool"
  - name: netok-integration
    match: { syscall: sandbox.start, plugin: mcp-netok }
    action: allow
    constraints: { require_sandbox: integration-test }
`
	p, err := policy.Load("mcp-test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	k, _, home := mcpKernel(t, "../../examples/parseconfig", policy.NewEngine(p, policy.Options{}), func(home string) []mcpconfig.Server {
		return []mcpconfig.Server{
			{Name: "gosrv", Command: goSrv, Args: []string{"-home", home}, Env: map[string]string{"GREETING": "hi"}, TimeoutSeconds: 5, Scope: mcpconfig.ScopeProject},
			{Name: "pysrv", Command: pySrv, Scope: mcpconfig.ScopeUser},
			// Asks for the network: the integration-test sandbox, which
			// this policy does not open for it.
			{Name: "netsrv", Command: goSrv, Network: []string{"example.com:443"}, Scope: mcpconfig.ScopeProject},
			{Name: "netok", Command: goSrv, Network: []string{listed}, Scope: mcpconfig.ScopeProject},
			{Name: "websrv", URL: web.URL + "/mcp", Scope: mcpconfig.ScopeProject},
		}
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Listing: names under each server's prefix, schemas kept, the
	// Python tool with a dotted name left out.
	gt, err := k.MCPTools(ctx, "gosrv")
	if err != nil {
		t.Fatal(err)
	}
	pt, err := k.MCPTools(ctx, "pysrv")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range append(gt, pt...) {
		names = append(names, x.Name)
		if x.Name == "mcp.pysrv.add" && !strings.Contains(string(x.ParametersJSON), `"required":["a","b"]`) {
			t.Errorf("add's schema: %s", x.ParametersJSON)
		}
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"mcp.gosrv.echo", "mcp.gosrv.probe", "mcp.gosrv.crash", "mcp.pysrv.add", "mcp.pysrv.environ"} {
		if !strings.Contains(got, want) {
			t.Fatalf("tools %q: %s missing", got, want)
		}
	}
	if strings.Contains(got, "bad.name") {
		t.Fatalf("tools %q: a dotted MCP tool name was offered", got)
	}

	if _, err := k.MCPTools(ctx, "netsrv"); !uerr.HasCode(err, router.CodePolicyDenied) {
		t.Fatalf("a server with --network started without the policy's integration-test opt-in: %v", err)
	}

	appr := &countingApprover{}
	sess := &router.Session{ID: "mcp", Mode: "strict", Caller: "model", Approver: appr}
	call := func(tool, args string) router.Result {
		return k.Router.Call(ctx, sess, router.Call{Tool: tool, Args: json.RawMessage(args)})
	}
	if r := call("mcp.pysrv.add", `{"a":2,"b":40}`); !r.OK || !strings.Contains(string(r.Output), `"text":"42"`) {
		t.Fatalf("pysrv.add: %+v %s", r.Err, r.Output)
	}
	if r := call("mcp.pysrv.add", `{"a":"two","b":40}`); r.OK || r.Err == nil || r.Err.Code != router.CodeArgsInvalid {
		t.Fatalf("pysrv.add with a string: want %s, got %+v", router.CodeArgsInvalid, r.Err)
	}
	if r := call("mcp.gosrv.echo", `{"text":"hello from the model"}`); !r.OK || !strings.Contains(string(r.Output), "hello from the model") {
		t.Fatalf("gosrv.echo: %+v %s", r.Err, r.Output)
	}
	if r := call("mcp.gosrv.forbidden", `{}`); r.OK || r.Err == nil || r.Err.Code != router.CodePolicyDenied {
		t.Fatalf("gosrv.forbidden: want %s, got %+v %s", router.CodePolicyDenied, r.Err, r.Output)
	}
	if r := call("mcp.gosrv.nope", `{}`); r.OK || r.Err == nil || r.Err.Code != router.CodeUnknownTool {
		t.Fatalf("gosrv.nope: want %s, got %+v", router.CodeUnknownTool, r.Err)
	}
	if appr.n["mcp.pysrv.add"] == 0 || appr.n["mcp.gosrv.echo"] == 0 || appr.n["mcp.gosrv.forbidden"] != 0 {
		t.Fatalf("reviews per tool %v: want the default policy to review the allowed MCP calls, never the denied one", appr.n)
	}

	// Containment, measured from inside the server.
	r := call("mcp.gosrv.probe", `{}`)
	if !r.OK {
		t.Fatalf("probe: %+v", r.Err)
	}
	var pr struct {
		Structured struct {
			Results map[string]string `json:"results"`
			Env     []string          `json:"env"`
		} `json:"structured_content"`
	}
	if err := json.Unmarshal(r.Output, &pr); err != nil {
		t.Fatalf("%v: %s", err, r.Output)
	}
	res := pr.Structured.Results
	for k, v := range res {
		t.Logf("measured: %-32s %s", k, v)
	}
	for _, attempt := range []string{"read /etc/shadow", "connect /var/run/docker.sock", "connect /run/docker.sock",
		"list $FLUFFY_HOME", "read $FLUFFY_HOME/db", "dial 1.1.1.1:443", "dial proxy.golang.org:443",
		"write /workspace/mcp-was-here", "write /out/mcp-was-here"} {
		if v, ok := res[attempt]; !ok || !strings.HasPrefix(v, "error: ") {
			t.Errorf("%s: %q, want it refused", attempt, v)
		}
	}
	for _, attempt := range []string{"read /workspace/README.md", "write $TMPDIR"} {
		if v := res[attempt]; !strings.HasPrefix(v, "ok: ") {
			t.Errorf("%s: %q, want it to work (the read-only view and the scratch directory)", attempt, v)
		}
	}
	env := strings.Join(pr.Structured.Env, "\n")
	t.Logf("measured: environment names %v", envNames(pr.Structured.Env))
	if strings.Contains(env, "host-canary") || strings.Contains(env, "DOCKER_HOST") || strings.Contains(env, home) {
		t.Errorf("the host's environment reached the server:\n%s", env)
	}
	if !strings.Contains(env, "GREETING=hi") {
		t.Errorf("the --env variable did not reach the server:\n%s", env)
	}

	// With --network and the policy's opt-in: the listed endpoint through
	// the proxy, nothing else.
	if r := call("mcp.netok.connect", `{"target":"`+listed+`"}`); !r.OK || !strings.Contains(string(r.Output), "200") || !strings.Contains(string(r.Output), "pong-from-the-host") {
		t.Fatalf("netok to its listed endpoint: %+v %s", r.Err, r.Output)
	} else {
		t.Logf("measured: --network %s: %s", listed, r.Output)
	}
	if r := call("mcp.netok.connect", `{"target":"example.com:443"}`); !r.OK || !strings.Contains(string(r.Output), "403") {
		t.Fatalf("netok to an unlisted host: %+v %s", r.Err, r.Output)
	} else {
		t.Logf("measured: --network %s, unlisted example.com:443: %s", listed, r.Output)
	}

	// A streamable HTTP server, reached through the proxy alone.
	if r := call("mcp.websrv.greet", `{"who":"fluffy"}`); !r.OK || !strings.Contains(string(r.Output), "hello, fluffy, over HTTP") {
		t.Fatalf("websrv.greet: %+v %s", r.Err, r.Output)
	}

	// A crash, a hang and a flood each fail their call (retryable) and
	// the next call gets a fresh server.
	for _, bad := range []string{"mcp.gosrv.crash", "mcp.gosrv.hang", "mcp.gosrv.flood"} {
		r := call(bad, `{}`)
		if r.OK || r.Err == nil {
			t.Fatalf("%s: ok, want a failure", bad)
		}
		t.Logf("%s: %s: %s", bad, r.Err.Code, r.Err.What)
		if r := call("mcp.gosrv.echo", `{"text":"after"}`); !r.OK {
			t.Fatalf("echo after %s: %+v", bad, r.Err)
		}
	}

	// Every call is in the audit log, the denied one with its rule.
	recs, err := k.Audit.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	netAudited := map[string]string{}
	for _, rec := range recs {
		if rec.EventType == kernel.EventNetworkRequest && rec.Caller == "mcp-netok" {
			netAudited[rec.Metadata["host"]] = rec.PolicyDecision
		}
		if strings.HasPrefix(rec.ToolName, "mcp.") || strings.HasPrefix(rec.SyscallType, "mcp.") {
			seen[string(rec.EventType)+" "+rec.ToolName+rec.SyscallType+" "+rec.PolicyDecision+" "+rec.PolicyRuleName] = true
		}
	}
	var lines []string
	for s := range seen {
		lines = append(lines, s)
	}
	all := strings.Join(lines, "\n")
	if netAudited[listed] != string(audit.DecisionAllowed) || netAudited["example.com:443"] != string(audit.DecisionDenied) {
		t.Errorf("the proxy's decisions for mcp-netok in the audit log: %v", netAudited)
	}
	for _, want := range []string{"mcp.gosrv.probe", "mcp.pysrv.add", "mcp.gosrv.crash", "mcp-forbidden"} {
		if !strings.Contains(all, want) {
			t.Errorf("the audit log has no record of %s:\n%s", want, all)
		}
	}
}

func envNames(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

// TestMCPToolInAStrictTask: a scripted model uses two MCP tools inside a
// whole strict task that ends in a merged commit: one reviewed once and
// approved for the session, one approved "always" (the project's policy
// file gains an exception for that tool alone), neither asked again.
func TestMCPToolInAStrictTask(t *testing.T) {
	lt := languageTasks[0] // python
	if _, err := exec.LookPath("pytest"); err != nil {
		t.Fatal("the MCP task test needs pytest on the host (.ci/run installs it)")
	}
	srcDir := t.TempDir()
	for name, content := range lt.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(srcDir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(srcDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := scriptedCassette(t, [][]scriptedCall{
		{{"m1", "mcp.pysrv.add", map[string]any{"a": 5, "b": -3}}},
		{{"m2", "mcp.pysrv.add", map[string]any{"a": 2, "b": 0}}},
		{{"e1", "mcp.pysrv.environ", map[string]any{}}},
		{{"e2", "mcp.pysrv.environ", map[string]any{}}},
		{{"p1", "plan.complete", map[string]any{"plan": "1. " + lt.testPath + ": sub(5, 3) == 2 (fails: no sub yet). 2. " + lt.srcPath + ": add sub. 3. Red, then green."}}},
		{{"w1", "fs.write", map[string]any{"path": lt.testPath, "content": lt.newTest}}, {"r1", "test.run", map[string]any{}}},
		{{"w2", "fs.write", map[string]any{"path": lt.srcPath, "content": lt.newSrc}}, {"r2", "test.run", map[string]any{}}},
	})
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"cassette": string(data)})
	pySrv := mcpPyServer(t)
	k, ws, _ := mcpKernel(t, srcDir, nil, func(string) []mcpconfig.Server {
		return []mcpconfig.Server{{Name: "pysrv", Command: pySrv, Scope: mcpconfig.ScopeProject}}
	}, cfg)
	tasks, err := k.OpenTasks(context.Background(), task.Options{Provider: "provider-replay", Model: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tasks.Close)
	var ev events
	var mu sync.Mutex
	mcpReviews := map[string]int{}
	mcpScopes := map[string][]string{}
	onEvent := func(e agent.Event) {
		ev.add(e)
		if e.Type != agent.EventReviewRequested || e.Review == nil {
			return
		}
		scope := router.ScopeOnce
		for tool, answer := range map[string]string{"mcp.pysrv.add": router.ScopeSession, "mcp.pysrv.environ": router.ScopeAlways} {
			if strings.HasPrefix(e.Review.Summary, tool+" ") {
				mu.Lock()
				mcpReviews[tool]++
				mcpScopes[tool] = e.Review.Scopes
				mu.Unlock()
				scope = answer
			}
		}
		id := e.Review.ID
		go func() { _ = tasks.Respond(id, router.Approval{Approved: true, Scope: scope, By: "test"}) }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done, err := tasks.Run(ctx, task.Request{Prompt: "add sub to calc", Yes: true, Interactive: true}, onEvent)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agent.StatusDone {
		t.Fatalf("task ended %s: %s\ntools: %v\nstates: %v", done.Status, done.Reason, ev.tools(), ev.states())
	}
	tl := strings.Join(ev.tools(), " ")
	for _, tool := range []string{"mcp.pysrv.add", "mcp.pysrv.environ"} {
		if strings.Count(tl, tool) != 2 || strings.Contains(tl, tool+"!") {
			t.Fatalf("tool results %s: want two successful %s calls", tl, tool)
		}
		if mcpReviews[tool] != 1 {
			t.Fatalf("%d reviews of %s: want one, then not asked again", mcpReviews[tool], tool)
		}
		// The syscall mcp.SERVER.TOOL names one tool of one server, so the
		// policy can say "always" for it as exactly as for a file path.
		if want := []string{router.ScopeOnce, router.ScopeSession, router.ScopeAlways}; !slices.Equal(mcpScopes[tool], want) {
			t.Fatalf("%s's review offers %v, want %v", tool, mcpScopes[tool], want)
		}
	}
	pol, err := os.ReadFile(filepath.Join(ws, ".fluffy", "policy.yaml"))
	if err != nil {
		t.Fatalf("\"always\" wrote no project policy: %v", err)
	}
	if !strings.Contains(string(pol), "{syscall: mcp.pysrv.environ, plugin: mcp-pysrv}") || strings.Contains(string(pol), "syscall: mcp.pysrv.add") {
		t.Fatalf("the project policy does not exempt mcp.pysrv.environ alone:\n%s", pol)
	}
	for path, want := range map[string]string{lt.srcPath: lt.newSrc, lt.testPath: lt.newTest} {
		if got, _ := os.ReadFile(filepath.Join(ws, path)); string(got) != want {
			t.Fatalf("%s was not merged:\n%s", path, got)
		}
	}
	log := git(t, ws, "log", "--format=%H %s")
	if n := len(strings.Split(strings.TrimSpace(log), "\n")); n != 2 || done.Commit == "" || !strings.HasPrefix(log, done.Commit) {
		t.Fatalf("want one new commit %q on top of the first, git log:\n%s", done.Commit, log)
	}
}
