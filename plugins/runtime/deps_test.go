package runtime

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDockerClientOnlyInTheAdapter: DESIGN keeps the container engine's
// client inside the runtime adapter plugin. Neither the fluffy binary nor
// pluginsdk/plugintest (which plugin authors link) may depend on a Docker
// or moby package; the conformance suite reads the engine through the
// adapter (State.Config). The adapter itself must still link the client,
// or this check would prove nothing.
func TestDockerClientOnlyInTheAdapter(t *testing.T) {
	deps := func(pkgs ...string) []string {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", pkgs, err)
		}
		return strings.Fields(string(out))
	}
	engine := func(p string) bool {
		return strings.HasPrefix(p, "github.com/docker/") || strings.HasPrefix(p, "github.com/moby/")
	}
	var bad []string
	for _, p := range deps("./cmd/fluffy", "./pluginsdk/plugintest") {
		if engine(p) {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("the fluffy binary or pluginsdk/plugintest links container-engine packages: %v", bad)
	}
	linked := false
	for _, p := range deps("./builtin-plugins/runtime-docker") {
		linked = linked || p == "github.com/docker/docker/client"
	}
	if !linked {
		t.Errorf("runtime-docker does not link github.com/docker/docker/client: the check above looks for the wrong packages")
	}
}
