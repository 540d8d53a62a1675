package archdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fixtureName is the one naming scheme of fixture plugins: the kind the
// plugin serves ("any" for one binary of many kinds), a dash, what it is.
var fixtureName = regexp.MustCompile(`^(tool|provider|vcs|policy|runtime|any)-[a-z0-9]+(-[a-z0-9]+)*$`)

// TestFixturePluginsHaveOneHome: fixture plugins live in internal/fixtures
// only, each named <kind>-<name>; no other directory is called a fixture.
func TestFixturePluginsHaveOneHome(t *testing.T) {
	root := filepath.Join("..", "..")
	home := filepath.Join(root, "internal", "fixtures")
	ents, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && !fixtureName.MatchString(e.Name()) {
			t.Errorf("internal/fixtures/%s: fixture plugins are named <kind>-<name> (tool-hostile, any-broken)", e.Name())
		}
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || rel == "internal/fixtures" {
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), "fixture") {
			t.Errorf("%s: fixture plugins live in internal/fixtures/<kind>-<name>", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
