package policy

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// builtinModel is what the built-in rules must decide for req, written
// from their specification and independently of the engine (no glob, no
// confine): a path that is not a plain project-relative path (or the root
// itself) is denied;
// nothing under .fluffy/ is a plugin's; policy.update is reviewed (denied
// to plugins); the kernel's and bootstrap's files under .fluffy/ are never
// changed through fs.*. Letter case never matters under .fluffy/.
func builtinModel(req Request) Action {
	plugin := req.Caller.Kind == "plugin" || req.Caller.Plugin != ""
	var segs []string
	if p := req.Path; p != "" {
		bad := p[0] == '/' || strings.ContainsAny(p, "\\\x00")
		for _, s := range strings.Split(p, "/") {
			switch s {
			case "..":
				bad = true
			case "", ".":
			default:
				segs = append(segs, s)
			}
		}
		if bad {
			return Deny
		}
		// No named segment at all (".", "./"): the project root, a valid
		// path (listing the whole project is judged on it).
	}
	inFluffy := len(segs) > 0 && strings.ToLower(segs[0]) == ".fluffy"
	if inFluffy && plugin {
		return Deny
	}
	if req.Syscall == "policy.update" {
		if plugin {
			return Deny
		}
		return RequireReview
	}
	readOnly := slices.Contains([]string{"fs.read", "fs.list", "fs.exists", "fs.stat"}, req.Syscall)
	if inFluffy && len(segs) >= 2 && strings.HasPrefix(req.Syscall, "fs.") && !readOnly {
		// A protected name protects everything below it too.
		n := strings.ToLower(segs[1])
		yaml := strings.HasSuffix(n, ".yaml")
		switch {
		case n == "policy.d", n == "bootstrap", n == "kernel", n == "run", n == "plugins",
			n == "db", strings.HasPrefix(n, "db."), n == "out", n == "sessions",
			strings.HasPrefix(n, "policy") && yaml, strings.HasPrefix(n, ".policy"),
			strings.HasPrefix(n, "bootstrap") && yaml, n == "config.yaml",
			strings.HasSuffix(n, ".sock"), strings.HasSuffix(n, ".pid"), n == "coverage-baseline.json":
			return Deny
		}
	}
	return Allow
}

type fataler interface {
	Helper()
	Fatal(...any)
}

// allowAll is an engine whose YAML layer allows everything, so that every
// deny or review it returns comes from a built-in rule.
func allowAll(t fataler) *Engine {
	t.Helper()
	p, err := Load("all.yaml", []byte("capabilities:\n  - { name: all, match: {}, action: allow }\n"))
	if err != nil {
		t.Fatal(err)
	}
	return NewEngine(p, Options{})
}

func checkBuiltins(t *testing.T, all *Engine, req Request) {
	t.Helper()
	want := builtinModel(req)
	r := all.Evaluate(context.Background(), req)
	if r.Decision != want {
		t.Fatalf("%s (caller kind %q): built-ins decided %v by %q, the model says %v", req, req.Caller.Kind, r.Decision, r.DecidingRule(), want)
	}
	if want == Deny && r.Deciding[0].Layer != LayerBuiltin {
		t.Fatalf("%s: denied by %s, not by a built-in", req, r.DecidingRule())
	}
}

// TestBuiltinProperty checks the built-in rules against builtinModel over
// many generated requests: spellings of protected paths (case, "./",
// "//", trailing "/", depth), escapes, NUL and backslash, every caller
// kind and the syscalls that read, mutate or do neither. It runs in every
// `go test` (the fuzz target adds random inputs on top).
func TestBuiltinProperty(t *testing.T) {
	all := allowAll(t)
	rng := rand.New(rand.NewPCG(1, 2))
	segPool := []string{".fluffy", ".FLUFFY", ".Fluffy", "policy.yaml", "Policy.YAML", "policy-dev.yaml", "policy.d",
		".policy.lock", "bootstrap", "bootstrap.yaml", "bootstrap-x.YAML", "config.yaml", "kernel", "run", "k.sock", "K.PID",
		"plugins", "db", "DB", "coverage-baseline.json", "Coverage-Baseline.JSON", "db.corrupt-1", "dbx", "out", "sessions", "audit", "state", "src", "a.go", ".env",
		".", "", "..", "x", "a\\b", "nul\x00", "policy", "yaml"}
	syscalls := []string{"fs.read", "fs.write", "fs.delete", "fs.rename", "fs.list", "fs.exists", "fs.stat", "fs.chmod",
		"search.grep", "test.run", "policy.update", "net.connect"}
	callers := []Caller{{Kind: "plugin", Plugin: "tool-fs"}, {Kind: "user"}, {Kind: "kernel"}, {}, {Plugin: "sneaky"}}
	seen := map[Action]int{}
	for i := 0; i < 50000; i++ {
		var b strings.Builder
		switch rng.IntN(20) {
		case 0:
			b.WriteString("/")
		case 1, 2, 3:
			b.WriteString("./")
		}
		// Protected paths are the interesting ones: start with .fluffy often.
		n := 1 + rng.IntN(4)
		for j := 0; j < n; j++ {
			if j > 0 {
				b.WriteString([]string{"/", "/", "/", "//", "/./"}[rng.IntN(5)])
			}
			if j == 0 && rng.IntN(2) == 0 {
				b.WriteString([]string{".fluffy", ".FLUFFY", ".fLuFfY"}[rng.IntN(3)])
				continue
			}
			b.WriteString(segPool[rng.IntN(len(segPool))])
		}
		if rng.IntN(5) == 0 {
			b.WriteString("/")
		}
		path := b.String()
		if rng.IntN(30) == 0 {
			path = ""
		}
		req := Request{Syscall: syscalls[rng.IntN(len(syscalls))], Path: path, Caller: callers[rng.IntN(len(callers))]}
		checkBuiltins(t, all, req)
		seen[builtinModel(req)]++
	}
	// The generator must exercise every verdict a lot, or the property
	// proves nothing.
	for _, a := range []Action{Allow, Deny, RequireReview} {
		if seen[a] < 1000 {
			t.Fatalf("generator produced only %d %v cases: %v", seen[a], a, seen)
		}
	}
}
