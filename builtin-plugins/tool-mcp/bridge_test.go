package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// TestMain lets the test binary be the bridge's confining launcher, as
// the plugin binary is in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == landlock.Arg {
		landlock.Main(os.Args[2:])
		return
	}
	os.Exit(m.Run())
}

func goServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	testbin.Into(t, "host/kernel/testdata/mcpserver", bin)
	return bin
}

func configured(t *testing.T, c config) *bridge {
	t.Helper()
	b := newBridge(hclog.NewNullLogger())
	t.Cleanup(b.close)
	raw, _ := json.Marshal(c)
	if err := b.Configure(context.Background(), base.Config{ConfigJSON: raw, Workspace: t.TempDir()}, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func names(defs []tool.Def) string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return strings.Join(out, " ")
}

// TestBridgeSpeaksToRealServers lists and calls the tools of a server on
// the Go SDK and of one written by hand in Python, each started by the
// bridge as its confined child.
func TestBridgeSpeaksToRealServers(t *testing.T) {
	ctx := context.Background()
	t.Run("go", func(t *testing.T) {
		b := configured(t, config{Server: "gosrv", Command: goServer(t), Env: map[string]string{"GREETING": "hi"}})
		defs, err := b.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(defs); !strings.Contains(got, "mcp.gosrv.echo") || !strings.Contains(got, "mcp.gosrv.probe") {
			t.Fatalf("tools %q", got)
		}
		for _, d := range defs {
			if d.Name == "mcp.gosrv.echo" && !strings.Contains(string(d.Parameters), `"text"`) {
				t.Fatalf("echo's schema lost its property: %s", d.Parameters)
			}
		}
		res, err := b.Execute(ctx, tool.Call{Tool: "mcp.gosrv.echo", Args: json.RawMessage(`{"text":"hello"}`)}, nil)
		if err != nil || !res.OK || !strings.Contains(string(res.Output), `hello`) {
			t.Fatalf("echo: %v %+v %s", err, res.Err, res.Output)
		}
		res, err = b.Execute(ctx, tool.Call{Tool: "mcp.gosrv.big"}, nil)
		if err != nil || !res.OK || len(res.Output) > maxText+1024 || !strings.Contains(string(res.Output), `"truncated":true`) {
			t.Fatalf("big: %v %+v, %d bytes", err, res.Err, len(res.Output))
		}
		res, err = b.Execute(ctx, tool.Call{Tool: "mcp.gosrv.probe"}, nil)
		if err != nil || !res.OK {
			t.Fatalf("probe: %v %+v", err, res.Err)
		}
		var p struct {
			StructuredContent struct {
				Env []string `json:"env"`
			} `json:"structured_content"`
		}
		if err := json.Unmarshal(res.Output, &p); err != nil {
			t.Fatal(err)
		}
		env := strings.Join(p.StructuredContent.Env, "\n")
		if !strings.Contains(env, "GREETING=hi") {
			t.Fatalf("the --env variable is missing from the server's environment:\n%s", env)
		}
		if strings.Contains(env, "PLUGIN_") {
			t.Fatalf("the plugin protocol's variables reached the server:\n%s", env)
		}
		// A crash ends the session: a plain error, for the supervisor.
		if res, err := b.Execute(ctx, tool.Call{Tool: "mcp.gosrv.crash"}, nil); err == nil {
			t.Fatalf("crash: no error (%+v)", res)
		}
		if err := b.Health(ctx); err == nil {
			t.Fatal("Health passes after the server exited")
		}
	})
	t.Run("python", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			t.Fatal("the Python MCP server test needs /usr/bin/python3")
		}
		script, _ := filepath.Abs("../../host/kernel/testdata/mcp_server.py")
		b := configured(t, config{Server: "pysrv", Command: script})
		defs, err := b.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(defs); got != "mcp.pysrv.add mcp.pysrv.environ" {
			t.Fatalf("tools %q (the dotted name must be left out)", got)
		}
		res, err := b.Execute(ctx, tool.Call{Tool: "mcp.pysrv.add", Args: json.RawMessage(`{"a":2,"b":40}`)}, nil)
		if err != nil || !res.OK || !strings.Contains(string(res.Output), `"42"`) {
			t.Fatalf("add: %v %+v %s", err, res.Err, res.Output)
		}
		res, err = b.Execute(ctx, tool.Call{Tool: "mcp.pysrv.nope"}, nil)
		if err != nil || res.OK || res.Err == nil || res.Err.Code != "MCP_TOOL_FAILED" {
			t.Fatalf("unknown tool: %v %+v", err, res)
		}
	})
}

// TestBridgeBoundsAFlood: a server that writes an endless line ends its
// session with an error instead of growing the bridge's memory.
func TestBridgeBoundsAFlood(t *testing.T) {
	ctx := context.Background()
	b := configured(t, config{Server: "gosrv", Command: goServer(t), TimeoutSeconds: 20})
	if _, err := b.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := b.Execute(ctx, tool.Call{Tool: "mcp.gosrv.flood"}, nil)
	if err == nil {
		t.Fatalf("flood: no error (%+v)", res)
	}
}
