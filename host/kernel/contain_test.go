package kernel

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestProjectDatabaseNeverThroughALink: a project that ships
// .fluffy or .fluffy/db as a link to somewhere else does not make the
// kernel create its database there.
func TestProjectDatabaseNeverThroughALink(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(ws, elsewhere string) error
	}{
		{".fluffy is a link", func(ws, e string) error { return os.Symlink(e, filepath.Join(ws, ".fluffy")) }},
		{".fluffy/db is a link", func(ws, e string) error {
			if err := os.Mkdir(filepath.Join(ws, ".fluffy"), 0o700); err != nil {
				return err
			}
			return os.Symlink(e, filepath.Join(ws, ".fluffy", "db"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, ws, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
			if err := tc.plant(ws, elsewhere); err != nil {
				t.Fatal(err)
			}
			k, err := Open(context.Background(), Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
			if err == nil {
				k.Close()
			}
			if !uerr.HasCode(err, confine.CodeSymlink) {
				t.Fatalf("Open = %v, want %s", err, confine.CodeSymlink)
			}
			if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
				t.Fatalf("the kernel wrote %d entries through the link", len(ents))
			}
		})
	}
}
