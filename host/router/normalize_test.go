package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// TestNormalizesWhatModelsSend: a tool name spelled another way that
// matches exactly one tool, and arguments wrapped in a JSON string or a
// markdown fence, are repaired before the call is judged, and the repair
// is in the call's tool_result audit record. The repaired call is judged
// like any other: a wrapped path the policy denies stays denied.
func TestNormalizesWhatModelsSend(t *testing.T) {
	f := newFixture(t)
	var seen tool.Call
	f.respond = func(call tool.Call) (tool.Result, error) {
		seen = call
		return tool.Result{OK: true, Output: json.RawMessage(`{}`)}, nil
	}
	fenced := "```json\n{\"path\":\"src/a.go\"}\n```"
	str, _ := json.Marshal(`{"path":"src/a.go"}`)
	cases := []struct {
		name, tool, args string
		code             string // "" = ran
		wantNote         string
	}{
		{"underscore", "demo_read", `{"path":"src/a.go"}`, "", `tool name "demo_read" is demo.read`},
		{"dash", "demo-read", `{"path":"src/a.go"}`, "", "is demo.read"},
		{"functions-prefix", "functions.demo.read", `{"path":"src/a.go"}`, "", "is demo.read"},
		{"case", "Demo.Read", `{"path":"src/a.go"}`, "", "is demo.read"},
		{"json-string-args", "demo.read", string(str), "", "a JSON string"},
		{"fenced-args", "demo.read", fenced, "", "markdown code fence"},
		{"both", "demo_read", fenced, "", "arguments were inside a markdown code fence; tool name \"demo_read\" is demo.read"},
		{"wrapped-path-still-judged", "demo.read", `"{\"path\":\"secret/k\"}"`, CodePolicyDenied, "a JSON string"},
		{"unknown-stays-unknown", "demo_delete", `{}`, CodeUnknownTool, ""},
		{"prose-args-refused", "demo.read", `"read src/a.go please"`, CodeArgsInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen = tool.Call{}
			res := f.call(&Session{ID: "s"}, c.tool, c.args)
			if c.code != "" {
				if res.OK || res.Err == nil || res.Err.Code != c.code {
					t.Fatalf("want %s, got %+v", c.code, res.Err)
				}
			} else {
				if !res.OK || res.Tool != "demo.read" || seen.Tool != "demo.read" || string(seen.Args) != `{"path":"src/a.go"}` {
					t.Fatalf("result %+v, plugin saw %s %s", res, seen.Tool, seen.Args)
				}
			}
			var note string
			for _, r := range f.records(t, res.CallID) {
				if r.EventType == audit.EventToolResult {
					note = r.Metadata[MetaNormalized]
				}
			}
			if !strings.Contains(note, c.wantNote) || (c.wantNote == "" && note != "") {
				t.Fatalf("audited normalisation %q, want %q", note, c.wantNote)
			}
		})
	}
}

// TestAmbiguousMangledNameIsRefused: a spelling that matches two tools is
// not guessed.
func TestAmbiguousMangledNameIsRefused(t *testing.T) {
	f := newFixture(t)
	known := map[string]bool{"a.b_c": true, "a_b.c": true}
	f.r.o.Catalog = catalogFunc(func(_, name string) (Target, error) {
		if !known[name] {
			return Target{}, uerr.New(CodeUnknownTool, "no tool "+name, "", "")
		}
		return Target{Plugin: "demo"}, nil
	})
	res := f.r.Call(context.Background(), &Session{}, Call{Tool: "a-b-c", Args: json.RawMessage(`{}`)})
	if res.OK || res.Err == nil || res.Err.Code != CodeUnknownTool || !strings.Contains(res.Err.What, "a.b_c") || !strings.Contains(res.Err.What, "a_b.c") || f.calls.Load() != 0 {
		t.Fatalf("ambiguous name: %+v", res.Err)
	}
}

// TestChangesOutsideJudgedPathsAreRefused: a tool that declares its write
// paths may propose changes only to those; a change to another path (one
// the gate and the policy never saw) is refused and nothing is ingested.
func TestChangesOutsideJudgedPathsAreRefused(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name    string
		changed []string
		ok      bool
	}{
		{"named", []string{"src/a.go"}, true},
		{"named-unclean", []string{"src/./a.go"}, true},
		{"other", []string{"src/a.go", "src/b.go"}, false},
		{"secret", []string{"secret/k"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.respond = func(call tool.Call) (tool.Result, error) {
				var chs []tool.FileChange
				for _, p := range c.changed {
					chs = append(chs, tool.FileChange{Path: p, Mode: tool.OutputFull, Artifact: "x"})
				}
				return tool.Result{OK: true, Output: json.RawMessage(`{}`), Changes: chs}, nil
			}
			ingested := 0
			sess := &Session{Ingester: ingestFunc(func(Output) error { ingested++; return nil })}
			res := f.call(sess, "demo.write", `{"path":"src/a.go","content":"x"}`)
			if c.ok != res.OK || (c.ok && ingested != 1) || (!c.ok && (ingested != 0 || res.Err == nil || res.Err.Code != CodeOutputInvalid)) {
				t.Fatalf("ok=%v ingested=%d err=%v", res.OK, ingested, res.Err)
			}
		})
	}
}
