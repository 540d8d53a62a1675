package sandbox

import (
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestCheckRunDir(t *testing.T) {
	for _, c := range []struct {
		dir string
		ok  bool
	}{
		{"/root/.fluffy/run", true},
		{"/" + strings.Repeat("x", maxRunDirLen-1), true},
		{"/" + strings.Repeat("x", maxRunDirLen), false},
		{"/tmp/TestSomethingLong1234567890/001/home/run", true},
		{"/tmp/TestKernelAuditsStartInstallAndShutdown4117822460/001/run", false},
	} {
		err := CheckRunDir(c.dir)
		if (err == nil) != c.ok {
			t.Errorf("%s (%d bytes): err=%v, want ok=%v", c.dir, len(c.dir), err, c.ok)
		}
		if err != nil && !uerr.HasCode(err, "HOME_PATH_TOO_LONG") {
			t.Errorf("%s: code %v", c.dir, err)
		}
	}
}
