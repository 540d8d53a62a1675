package router

import (
	"os/exec"
	"strings"
	"testing"
)

// The router needs only the gate's behaviour, not the workflow machine;
// importing host/state again would put the whole workflow chain back
// under every package that needs router.Output.
func TestRouterDoesNotDependOnState(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/fluffy-waffle/fluffy/host/state" {
			t.Fatalf("host/router depends on %s", dep)
		}
	}
}
