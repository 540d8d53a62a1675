package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

func call(t *testing.T, c tool.Client, name, args string) tool.Result {
	t.Helper()
	r, err := c.Execute(context.Background(), tool.Call{ID: "c1", OperationID: "op1", Tool: name, Args: json.RawMessage(args)}, nil)
	if err != nil {
		t.Fatalf("%s: transport error %v", name, err)
	}
	return r
}

func TestToolFS(t *testing.T) {
	env := plugintest.NewEnv(t, map[string]string{"src/a.go": "package a\n\nfunc A() {}\n", "README": "hi\n"})
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("top secret"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(env.Workspace, "leak"))
	os.Symlink(outside, filepath.Join(env.Workspace, "leakdir"))
	os.Symlink("src", filepath.Join(env.Workspace, "srclink"))
	for _, v := range []int{1, 2} {
		c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), v, env)
		cases := []struct {
			name, tool, args string
			code             string // expected error code, "" = ok
			contains         string
		}{
			{"read", "fs.read", `{"path":"src/a.go"}`, "", "func A()"},
			{"read-missing", "fs.read", `{"path":"nope"}`, "FS_NOT_FOUND", ""},
			{"read-abs", "fs.read", `{"path":"/etc/passwd"}`, "FS_PATH_ABSOLUTE", ""},
			{"read-dotdot", "fs.read", `{"path":"src/../../x"}`, "FS_PATH_ESCAPES", ""},
			{"read-symlink-out", "fs.read", `{"path":"leak"}`, "FS_PATH_ESCAPES", ""},
			{"read-symlink-dir-out", "fs.read", `{"path":"leakdir/secret"}`, "FS_PATH_ESCAPES", ""},
			{"read-bad-args", "fs.read", `{"path":3}`, "TOOL_ARGS_INVALID", ""},
			{"read-unknown-field", "fs.read", `{"path":"README","x":1}`, "TOOL_ARGS_INVALID", ""},
			{"list", "fs.list", `{"path":"src"}`, "", "src/a.go"},
			{"list-root-rec", "fs.list", `{"recursive":true}`, "", "src/a.go"},
			{"exists", "fs.exists", `{"path":"README"}`, "", `"exists":true`},
			{"exists-no", "fs.exists", `{"path":"zzz"}`, "", `"exists":false`},
			{"exists-symlink-out", "fs.exists", `{"path":"leak"}`, "FS_PATH_ESCAPES", ""},
			{"unknown-tool", "fs.nope", `{}`, "TOOL_UNKNOWN", ""},
			{"write-stale", "fs.write", `{"path":"README","content":"x","expected_sha256":"abc"}`, "STALE_FILE", ""},
			{"write-escape", "fs.write", `{"path":"../x","content":"x"}`, "FS_PATH_ESCAPES", ""},
			{"write-through-symlink", "fs.write", `{"path":"leakdir/new","content":"x"}`, "FS_PATH_ESCAPES", ""},
			{"write-through-inner-symlink", "fs.write", `{"path":"srclink/b.go","content":"x"}`, "FS_PATH_SYMLINK", ""},
			{"write-git-hook", "fs.write", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`, "FS_PATH_RESERVED", ""},
			{"write-kernel-dir", "fs.write", `{"path":".fluffy/db/MANIFEST","content":"x"}`, "FS_PATH_RESERVED", ""},
		}
		for _, tc := range cases {
			r := call(t, c, tc.tool, tc.args)
			if tc.code != "" {
				if r.OK || r.Err == nil || r.Err.Code != tc.code {
					t.Errorf("v%d %s: want error %s, got ok=%v err=%v", v, tc.name, tc.code, r.OK, r.Err)
				}
				continue
			}
			if !r.OK {
				t.Errorf("v%d %s: unexpected error %v", v, tc.name, r.Err)
				continue
			}
			if !strings.Contains(string(r.Output), tc.contains) {
				t.Errorf("v%d %s: output %s lacks %q", v, tc.name, r.Output, tc.contains)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "top secret" {
		t.Fatal("outside file changed")
	}
}

func TestToolFSWriteProducesPatchNotProjectChange(t *testing.T) {
	env := plugintest.NewEnv(t, map[string]string{"src/a.go": "package a\n\nfunc A() {}\n"})
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	r := call(t, c, "fs.read", `{"path":"src/a.go"}`)
	var rr readResult
	json.Unmarshal(r.Output, &rr)
	newSrc := "package a\n\nfunc A() { println(1) }\n"
	args, _ := json.Marshal(map[string]string{"path": "src/a.go", "content": newSrc, "expected_sha256": rr.SHA256})
	w := call(t, c, "fs.write", string(args))
	if !w.OK {
		t.Fatalf("write: %v", w.Err)
	}
	if got, _ := os.ReadFile(filepath.Join(env.Workspace, "src/a.go")); string(got) != "package a\n\nfunc A() {}\n" {
		t.Fatalf("project file was modified: %q", got)
	}
	if len(w.Changes) != 1 || w.Changes[0].Mode != tool.OutputPatch || w.Changes[0].SHA256Before != rr.SHA256 {
		t.Fatalf("changes: %+v", w.Changes)
	}
	d, err := os.ReadFile(filepath.Join(env.OutDir, w.Changes[0].Artifact))
	if err != nil {
		t.Fatal(err)
	}
	applied, err := patch.Apply([]byte("package a\n\nfunc A() {}\n"), string(d))
	if err != nil || string(applied) != newSrc {
		t.Fatalf("patch does not reproduce the write: %v %q", err, applied)
	}
	// A new file in a new directory.
	w2 := call(t, c, "fs.write", `{"path":"tests/a_test.go","content":"package a\n"}`)
	if !w2.OK || w2.Changes[0].SHA256Before != "" {
		t.Fatalf("create: %+v %v", w2.Changes, w2.Err)
	}
}

func TestToolFSBinaryNegotiates(t *testing.T) {
	bin := plugintest.Build(t, ".")
	env := plugintest.NewEnv(t, map[string]string{"x.txt": "x\n"})
	for _, tc := range []struct {
		offer []int
		want  int
	}{{[]int{1, 2}, 2}, {[]int{1}, 1}} {
		b := plugintest.StartTool(t, bin, env, tc.offer...)
		if b.Version != tc.want || b.Tool.APIVersion() != tc.want {
			t.Fatalf("offered %v: negotiated %d (client %d), want %d", tc.offer, b.Version, b.Tool.APIVersion(), tc.want)
		}
		r := call(t, b.Tool, "fs.read", `{"path":"x.txt"}`)
		if !r.OK || !strings.Contains(string(r.Output), `"     1\tx\n"`) {
			t.Fatalf("read via binary: %+v", r)
		}
		b.Client.Kill()
	}
}
