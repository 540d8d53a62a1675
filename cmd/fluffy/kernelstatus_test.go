package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestKernelVerbsWithNoKernel: with no kernel running, `kernel status`
// answers "not running" and `kernel stop` has nothing to do; neither is an
// error a script has to tell from a broken socket.
func TestKernelVerbsWithNoKernel(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	out, errOut, code := c.run("kernel", "status", "--project", dir)
	if code != 0 {
		t.Fatalf("kernel status: exit %d\n%s", code, errOut)
	}
	var st struct {
		Running *bool
		Project string
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Running == nil || *st.Running || st.Project == "" {
		t.Fatalf("kernel status with no kernel: %v\n%s", err, out)
	}
	out, errOut, code = c.run("kernel", "stop", "--project", dir)
	if code != 0 || !strings.Contains(out, "no kernel running") {
		t.Fatalf("kernel stop with no kernel: exit %d\n%s\n%s", code, out, errOut)
	}
}
