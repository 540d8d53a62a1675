package router

import (
	"context"
	"testing"

	"github.com/fluffy-waffle/fluffy/manifests"
)

// TestLightCall: only a call that cannot change anything, runs in the
// plugin's shared instance and runs no programs is light; the router hands
// the classification and the plugin to the scheduler with each task.
func TestLightCall(t *testing.T) {
	read := []manifests.PathDecl{{Arg: "path", Access: manifests.AccessRead}}
	write := []manifests.PathDecl{{Arg: "path", Access: manifests.AccessWrite}}
	for _, c := range []struct {
		name string
		t    Target
		want bool
	}{
		{"read-only tool", Target{Tool: manifests.Tool{Paths: read}, Capabilities: []string{"fs.read"}}, true},
		{"two read paths", Target{Tool: manifests.Tool{Paths: append(read, manifests.PathDecl{Arg: "to", Access: manifests.AccessRead})}}, true},
		{"a write path", Target{Tool: manifests.Tool{Paths: append(read, write...)}}, false},
		{"write only", Target{Tool: manifests.Tool{Paths: write}}, false},
		{"no paths declared (test.run)", Target{Tool: manifests.Tool{}}, false},
		{"runs programs (shell.exec)", Target{Tool: manifests.Tool{Paths: read}, Capabilities: []string{"fs.list", CapToolchain}}, false},
		{"per_call lifetime: a fresh sandbox", Target{Tool: manifests.Tool{Paths: read, Lifetime: manifests.LifetimePerCall}}, false},
	} {
		if got := LightCall(c.t); got != c.want {
			t.Errorf("%s: LightCall = %v, want %v", c.name, got, c.want)
		}
	}

	f := newFixture(t)
	var tasks []Task
	f.r.o.Scheduler = schedFunc(func(ctx context.Context, t Task) error {
		tasks = append(tasks, t)
		return t.Run(ctx)
	})
	if res := f.call(nil, "demo.read", `{"path":"src/a.go"}`); !res.OK {
		t.Fatal(res.Err)
	}
	if res := f.call(nil, "demo.write", `{"path":"src/a.go"}`); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := f.call(nil, "demo.run", `{}`); res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(tasks) != 3 || !tasks[0].Light || tasks[1].Light || tasks[2].Light || tasks[0].Plugin != "demo" {
		t.Fatalf("tasks %+v", tasks)
	}
}
