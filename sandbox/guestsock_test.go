package sandbox

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestOpenGuestSockTellsTheEngineFromThePlugin: what openGuestSock
// blames on the engine (so the kernel gives up socket tmpfs) is only what
// a plugin cannot bring about; a pid that names no process here is
// errGuestGone, left to the caller to tell an ended container from a
// foreign engine.
func TestOpenGuestSockTellsTheEngineFromThePlugin(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name      string
		pid       int64
		gone      bool
		errSubstr string
	}{
		{"no pid", 0, false, "reports no pid"},
		{"a process of another cgroup", int64(os.Getpid()), false, "is not container"},
		{"no such process", 1 << 30, true, "no such process here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := openGuestSock(tc.pid, id, os.Getuid())
			if err == nil {
				g.close()
				t.Fatal("opened a socket directory of no container")
			}
			if errors.Is(err, errGuestGone) != tc.gone || errors.Is(err, errGuestRefused) || !strings.Contains(err.Error(), tc.errSubstr) {
				t.Fatalf("error %v: gone=%v refused=%v, want gone=%v and %q", err, errors.Is(err, errGuestGone), errors.Is(err, errGuestRefused), tc.gone, tc.errSubstr)
			}
		})
	}
}
