package workspace

import (
	"os/exec"
	"strings"
	"testing"
)

// The workspace ingests a proposal, it does not route calls; importing
// host/router again would put the router's whole tree under the
// workspace, merge and commit.
func TestWorkspaceDoesNotDependOnRouter(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/fluffy-waffle/fluffy/host/router" {
			t.Fatalf("host/workspace depends on %s", dep)
		}
	}
}
