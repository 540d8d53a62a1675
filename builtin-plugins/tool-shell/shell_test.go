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
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// TestMain lets the test binary serve as the confining launcher, as the
// plugin binary does in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == landlock.Arg {
		landlock.Main(os.Args[2:])
		return
	}
	os.Exit(m.Run())
}

func TestCheckArgv(t *testing.T) {
	dir := t.TempDir()
	disguised := filepath.Join(dir, "mytool")
	if err := os.Symlink("/bin/bash", disguised); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		argv []string
		code string
	}{
		{[]string{"go", "version"}, ""},
		{[]string{"ls", "-la"}, ""},
		{[]string{}, "SHELL_ARGS_INVALID"},
		{[]string{""}, "SHELL_ARGS_INVALID"},
		{[]string{"sh", "-c", "id"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"/bin/sh", "-c", "id"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"bash"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"dash"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"zsh"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"BASH"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"env", "sh"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"/usr/bin/env", "FOO=1", "ls"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"xargs", "sh"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"nice", "sh"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"busybox", "sh"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{disguised, "-c", "id"}, "SHELL_PROGRAM_REFUSED"},
		{[]string{"ls", "a\x00b"}, "SHELL_ARGS_INVALID"},
		{[]string{"ls", strings.Repeat("x", maxArgBytes+1)}, "SHELL_ARGS_INVALID"},
	}
	for _, c := range cases {
		err := checkArgv(c.argv)
		got := ""
		if err != nil {
			got = uerr.From(err).Code
		}
		if got != c.code {
			t.Errorf("checkArgv(%q) = %v, want code %q", c.argv, err, c.code)
		}
	}
}

func callInProcess(t *testing.T, ws, out, args string) (execResult, error) {
	t.Helper()
	tc := &pluginsdk.ToolContext{Call: tool.Call{ID: "op", OperationID: "op"}, Workspace: ws, OutDir: out, Logger: hclog.NewNullLogger()}
	v, err := execTool(context.Background(), tc, json.RawMessage(args))
	if err != nil {
		return execResult{}, err
	}
	return v.(execResult), nil
}

// TestExecInProcess runs real programs on the host through the same
// confining launcher the plugin uses.
func TestExecInProcess(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "hello.txt"), []byte("hi\n"), 0o644)
	outside := t.TempDir()

	r, err := callInProcess(t, ws, out, `{"argv":["ls"],"cwd":"sub"}`)
	if err != nil || r.ExitCode != 0 || r.Stdout != "hello.txt\n" {
		t.Fatalf("ls in sub: %+v %v", r, err)
	}
	if r, err := callInProcess(t, ws, out, `{"argv":["false"]}`); err != nil || r.ExitCode != 1 {
		t.Fatalf("false: %+v %v", r, err)
	}
	// Writes outside the scratch directory are refused by Landlock.
	r, err = callInProcess(t, ws, out, `{"argv":["touch","`+filepath.Join(outside, "poison")+`"]}`)
	if err != nil || r.ExitCode == 0 {
		t.Fatalf("touch outside: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "poison")); err == nil {
		t.Fatal("the command wrote outside its scratch directory")
	}
	// Output is capped, the whole of it is in the log.
	r, err = callInProcess(t, ws, out, `{"argv":["seq","1","100000"]}`)
	if err != nil || !r.Truncated || len(r.Stdout) > maxStdoutText+200 || !strings.HasSuffix(r.Stdout, "100000\n") {
		t.Fatalf("seq: truncated=%v len=%d %v", r.Truncated, len(r.Stdout), err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "op", r.LogFile)); err != nil || !strings.Contains(string(b), "\n54321\n") {
		t.Fatalf("full log: %v", err)
	}
	r, err = callInProcess(t, ws, out, `{"argv":["sleep","60"],"timeout_seconds":1}`)
	if err != nil || !r.TimedOut || r.ExitCode != -1 {
		t.Fatalf("sleep: %+v %v", r, err)
	}
	for _, c := range []struct{ args, code string }{
		{`{"argv":["ls"],"cwd":"../"}`, "FS_PATH_ESCAPES"},
		{`{"argv":["ls"],"cwd":"sub/hello.txt"}`, "SHELL_ARGS_INVALID"},
		{`{"argv":["sh","-c","ls"]}`, "SHELL_PROGRAM_REFUSED"},
		{`{"argv":["no-such-program-xyz"]}`, "SHELL_START_FAILED"},
		{`{"argv":["ls"],"env":{"A":"1"}}`, "TOOL_ARGS_INVALID"},
	} {
		if _, err := callInProcess(t, ws, out, c.args); uerr.From(err).Code != c.code {
			t.Errorf("%s: %v, want %s", c.args, err, c.code)
		}
	}
}
