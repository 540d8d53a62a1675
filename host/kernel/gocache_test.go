package kernel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestHostGoCache: which directory is layered under the project's cache,
// and when none is.
func TestHostGoCache(t *testing.T) {
	root := t.TempDir()
	home, project, cache, other := filepath.Join(root, "home"), filepath.Join(root, "proj"), filepath.Join(root, "gocache"), filepath.Join(root, "other")
	for _, d := range []string{home, project, cache, other, filepath.Join(project, "c"), filepath.Join(home, "c")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"FLUFFY_HOST_GOCACHE first", map[string]string{EnvHostGoCache: cache, "GOCACHE": other}, cache},
		{"then GOCACHE", map[string]string{"GOCACHE": other}, other},
		{"off", map[string]string{EnvHostGoCache: "off", "GOCACHE": other}, ""},
		{"GOCACHE=off", map[string]string{"GOCACHE": "off"}, ""},
		{"relative", map[string]string{EnvHostGoCache: "gocache"}, ""},
		{"absent", map[string]string{EnvHostGoCache: filepath.Join(root, "none")}, ""},
		{"inside the project", map[string]string{EnvHostGoCache: filepath.Join(project, "c")}, ""},
		{"the project inside it", map[string]string{EnvHostGoCache: root}, ""},
		{"inside FLUFFY_HOME", map[string]string{EnvHostGoCache: filepath.Join(home, "c")}, ""},
		{"unclean path", map[string]string{EnvHostGoCache: cache + "/./"}, cache},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := HostGoCache(func(k string) string { return c.env[k] }, home, project, "", hclog.NewNullLogger())
			if got.Path != c.want || got.Local != "" {
				t.Fatalf("got %+v, want path %q", got, c.want)
			}
		})
	}
	// A kernel in its L1 container sees host paths under the host root.
	hostRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(hostRoot, "h", ".cache", "go-build"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := HostGoCache(func(k string) string { return map[string]string{"GOCACHE": "/h/.cache/go-build"}[k] }, home, project, hostRoot, hclog.NewNullLogger())
	if got.Path != "/h/.cache/go-build" || got.Local != filepath.Join(hostRoot, "h", ".cache", "go-build") {
		t.Fatalf("in L1: %+v", got)
	}
}
