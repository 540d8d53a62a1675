package sandbox

import (
	"slices"
	"testing"

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// TestHostGoCacheMount: the host's Go build cache goes only where the
// project's build cache goes, always read-only, with the variable that
// names it.
func TestHostGoCacheMount(t *testing.T) {
	ts := Templates()
	gv := ts["code-executor"]
	gv.OCIRuntime = "runsc"
	host := Toolchain{Path: "/home/u/.cache/go-build"}
	cases := []struct {
		name  string
		tpl   Template
		cache string
		want  bool
	}{
		{"code executor with the build cache", ts["code-executor"], "/x/cache", true},
		{"code executor without the build cache", ts["code-executor"], "", false},
		{"gVisor (no build cache)", gv, "/x/cache", false},
		{"template that runs no code", ts["ai-provider"], "/x/cache", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := codeMounts(c.tpl, LaunchSpec{BuildCache: c.cache, HostGoCache: host})
			r := &containerRunner{spec: spec, tpl: c.tpl, c: &Containers{}}
			var got []rt.Mount
			for _, m := range r.containerSpec().Mounts {
				if m.Target == GuestHostGoCache {
					got = append(got, m)
				}
			}
			env := hostGoCacheEnv(spec, GuestHostGoCache)
			if !c.want {
				if len(got) != 0 || len(env) != 0 {
					t.Fatalf("host cache given: %+v %v", got, env)
				}
				return
			}
			if len(got) != 1 || got[0].Source != host.Path || !got[0].ReadOnly {
				t.Fatalf("host cache mount %+v, want %s read-only", got, host.Path)
			}
			if !slices.Equal(env, []string{EnvHostGoCache + "=" + GuestHostGoCache}) {
				t.Fatalf("env %v", env)
			}
		})
	}
	if err := CheckToolchainPath("/hostcache/x"); err == nil {
		t.Errorf("a toolchain may not sit where the host cache is mounted")
	}
}
