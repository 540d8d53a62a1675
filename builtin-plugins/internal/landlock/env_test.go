package landlock

import (
	"strings"
	"testing"
)

// TestConfinedEnvDropsCaches: a confined program learns of no build
// cache, neither the project's nor the host's nor the cache program
// that layers them, and gets its own GOCACHE in the scratch directory.
func TestConfinedEnvDropsCaches(t *testing.T) {
	scratch := t.TempDir()
	in := []string{"PATH=/usr/bin", "GOCACHE=/cache/go-build", "FLUFFY_BUILD_CACHE=/cache",
		"GOCACHEPROG=/plugin/tool-test __fluffy_gocacheprog /hostcache/go-build /cache/go-build",
		"FLUFFY_HOST_GOCACHE=/hostcache/go-build", "GOFLAGS=-mod=mod"}
	got := map[string]string{}
	for _, kv := range confinedEnv(in, scratch) {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, k := range []string{"GOCACHEPROG", "FLUFFY_HOST_GOCACHE", "FLUFFY_BUILD_CACHE"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s=%s reaches the confined program", k, v)
		}
	}
	if !strings.HasPrefix(got["GOCACHE"], scratch+"/") || got["PATH"] != "/usr/bin" || got["GOFLAGS"] != "-mod=mod" {
		t.Errorf("env %v", got)
	}
}
