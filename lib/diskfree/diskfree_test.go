package diskfree

import (
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestEnsureNamesPathAndNeed(t *testing.T) {
	dir := t.TempDir()
	free, err := Free(dir)
	if err != nil || free <= 0 {
		t.Fatalf("Free: %d %v", free, err)
	}
	for _, tc := range []struct {
		name string
		need int64
		ok   bool
	}{
		{"fits", 0, free >= Reserve},
		{"more than free", free + 1<<30, false},
		{"just over with the reserve", free - Reserve + 1<<20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Ensure(dir, tc.need, "plugin x's /out")
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			ue, ok := uerr.As(err)
			if !ok || ue.Code != CodeDiskFull || !strings.Contains(ue.Why, dir) || !strings.Contains(ue.Why, "needs") ||
				!strings.Contains(ue.What, "plugin x's /out") || !strings.Contains(ue.Fix, "free at least") {
				t.Fatalf("Ensure(%d) with %d free: %#v", tc.need, free, err)
			}
		})
	}
}
