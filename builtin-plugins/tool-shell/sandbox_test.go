package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
)

// TestExecInDockerSandbox runs shell.exec inside a real L2 container
// through the kernel: the toolchain is there, shells are refused, and the
// program can write neither /out nor the read-only view.
func TestExecInDockerSandbox(t *testing.T) {
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "hello.txt"), []byte("hi\n"), 0o644)
	e := kerneltest.Start(t, ws, kerneltest.Options{}, "builtin-plugins/tool-shell")
	call := func(op, args string) execResult {
		t.Helper()
		res := e.Call(t, "tool-shell", "shell.exec", op, args)
		if !res.OK {
			t.Fatalf("shell.exec %s: %+v", args, res.Err)
		}
		var r execResult
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call("op1", `{"argv":["go","version"]}`); r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "go version go1.") {
		t.Fatalf("go version: %+v", r)
	}
	if r := call("op2", `{"argv":["cat","hello.txt"],"cwd":"sub"}`); r.ExitCode != 0 || r.Stdout != "hi\n" {
		t.Fatalf("cat: %+v", r)
	}
	for i, target := range []string{"/out/poisoned-by-shell", "/workspace/poisoned-by-shell", "/tmp/poisoned-by-shell"} {
		if r := call("w"+string(rune('a'+i)), `{"argv":["touch","`+target+`"]}`); r.ExitCode == 0 {
			t.Errorf("touch %s succeeded", target)
		}
	}
	if res := e.Call(t, "tool-shell", "shell.exec", "op3", `{"argv":["sh","-c","id"]}`); res.OK || res.Err.Code != "SHELL_PROGRAM_REFUSED" {
		t.Fatalf("sh accepted: %+v", res)
	}
	if res := e.Call(t, "tool-shell", "shell.exec", "op4", `{"argv":["ls"],"cwd":"../"}`); res.OK || res.Err.Code != "FS_PATH_ESCAPES" {
		t.Fatalf("cwd escape: %+v", res)
	}
	var found []string
	filepath.Walk(e.Kernel.Session.Dir(), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Name() == "poisoned-by-shell" {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Fatalf("the command wrote outside its scratch directory: %v", found)
	}
}
