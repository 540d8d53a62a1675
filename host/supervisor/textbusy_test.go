package supervisor

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// An exec refused with ETXTBSY, however it is wrapped, is retried; other
// start failures are not.
func TestTextBusyIsRecognised(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "fork/exec", Path: "/h/bin/x", Err: syscall.ETXTBSY}, true},
		{fmt.Errorf("start: %w", &os.PathError{Op: "fork/exec", Path: "/h/bin/x", Err: syscall.ETXTBSY}), true},
		{uerr.New("PLUGIN_START_FAILED", "plugin x did not start", "fork/exec /h/bin/x: text file busy", "retry"), true},
		{&os.PathError{Op: "fork/exec", Path: "/h/bin/x", Err: syscall.ENOENT}, false},
		{errors.New("plugin exited before we could connect"), false},
	} {
		if got := textBusy(c.err); got != c.want {
			t.Errorf("textBusy(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
