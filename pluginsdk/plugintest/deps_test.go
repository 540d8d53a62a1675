package plugintest

import (
	"os/exec"
	"strings"
	"testing"
)

// What a plugin author links — pluginsdk/... (this kit included) and the
// plugin API packages plugins/... — carries no kernel, no badger and no
// Docker client: the packages `go list -deps` reports for them match none
// of the forbidden prefixes.
func TestAuthorDependencies(t *testing.T) {
	const mod = "github.com/fluffy-waffle/fluffy/"
	out, err := exec.Command("go", "list", "-deps", mod+"pluginsdk/...", mod+"plugins/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	// The listing must cover the kit itself, or an empty answer would pass.
	for _, want := range []string{mod + "pluginsdk", mod + "pluginsdk/plugintest", mod + "plugins/tool", mod + "conformance/spec"} {
		if !contains(deps, want) {
			t.Fatalf("go list -deps does not list %s; the check would prove nothing", want)
		}
	}
	// A dependency is forbidden when it is one of these paths or below it.
	for _, c := range []struct {
		path, why string
		allow     []string
	}{
		{path: mod + "host", why: "the kernel"},
		{path: mod + "conformance", why: "the conformance runner", allow: []string{mod + "conformance/spec"}},
		{path: mod + "sandbox", why: "the kernel's sandbox launchers"},
		{path: "github.com/dgraph-io/badger", why: "the kernel's database"},
		{path: "github.com/docker/docker", why: "the Docker client"},
	} {
		t.Run(c.why, func(t *testing.T) {
			for _, d := range deps {
				if (d == c.path || strings.HasPrefix(d, c.path+"/")) && !contains(c.allow, d) {
					t.Errorf("a plugin author's build links %s (%s)", d, c.why)
				}
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
