package conformance_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/conformance"
)

// IdleMain reports what it sees and returns once told to stop.
func TestIdleMainReports(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	var out bytes.Buffer
	if err := conformance.IdleMain(&out, stop); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "FLUFFY-IDLE ") {
		t.Fatalf("no report line: %q", line)
	}
	for _, k := range []string{"memory=", "pids=", "ifaces="} {
		if !strings.Contains(line, k) {
			t.Errorf("report lacks %s: %q", k, line)
		}
	}
	if !strings.Contains(line, "lo") {
		t.Errorf("the loopback interface is missing from %q", line)
	}
}
