package policy

import (
	"context"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// FuzzLoad: the loader never panics, and every error is a structured one.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(defaultYAML))
	f.Add([]byte("capabilities:\n  - { name: a, match: { syscall: fs.write, path_glob: [\"src/**\"] }, action: allow, constraints: { max_file_size: 10KiB } }\n"))
	f.Add([]byte("capabilities: [ { name: a, match: {}, except: [ {} ], action: deny } ]"))
	f.Add([]byte("version: 1\nmode: observe\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load("fuzz.yaml", data)
		if err != nil {
			if _, ok := uerr.As(err); !ok {
				t.Fatalf("unstructured error: %v", err)
			}
			return
		}
		e := NewEngine(p, Options{})
		r := e.Evaluate(context.Background(), Request{Syscall: "fs.write", Path: "src/a.go"})
		if r.Decision != Allow && r.Decision != Deny && r.Decision != RequireReview {
			t.Fatalf("decision %v", r.Decision)
		}
	})
}

// FuzzEvaluate: any request gets one of the three decisions, a reason for
// any deny, explain agrees with evaluate, and the built-in protections hold
// whatever the path spelling (checked against builtinModel, written
// independently of the engine, over an allow-everything policy).
func FuzzEvaluate(f *testing.F) {
	p, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	e := NewEngine(p, Options{})
	all := allowAll(f)
	f.Add("fs.write", "src/a.go", "", "strict", "test_writing", int64(10), "code-executor", "plugin")
	f.Add("fs.write", ".fluffy/policy.yaml", "", "", "", int64(0), "", "user")
	f.Add("fs.read", "../../etc/passwd", "", "", "", int64(0), "", "plugin")
	f.Add("net.connect", "", "api.openai.com", "", "", int64(0), "ai-provider", "plugin")
	f.Add("fs.write", "./.FLUFFY//audit/x", "", "", "", int64(0), "L2", "user")
	f.Add("fs.delete", ".fluffy/DB", "", "", "", int64(0), "", "user")
	f.Add("fs.read", ".fluffy/db/000001.vlog", "", "", "", int64(0), "", "plugin")
	f.Fuzz(func(t *testing.T, syscall, path, host, mode, state string, size int64, sandbox, callerKind string) {
		req := Request{Syscall: syscall, Path: path, Host: host, SessionMode: mode, State: state, Size: size, Sandbox: sandbox,
			Caller: Caller{Kind: callerKind, PluginKind: "tool", Instance: "fz#1"}}
		if callerKind == "plugin" {
			req.Caller.Plugin = "fz"
		}
		r := e.Evaluate(context.Background(), req)
		switch r.Decision {
		case Allow:
		case Deny, RequireReview:
			if len(r.Reasons) == 0 {
				t.Fatalf("%v without reason for %s", r.Decision, req)
			}
		default:
			t.Fatalf("decision %v", r.Decision)
		}
		x := e.Explain(context.Background(), req)
		if x.Decision != r.Decision {
			t.Fatalf("explain %v != evaluate %v for %s", x.Decision, r.Decision, req)
		}
		checkBuiltins(t, all, req)
	})
}
