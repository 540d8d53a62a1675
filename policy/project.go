package policy

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/fluffy-waffle/fluffy/uerr"
)

// ProjectPath is where a project's policy lives.
func ProjectPath(project string) string {
	return filepath.Join(project, ".fluffy", "policy.yaml")
}

// LoadProject loads the project's policy file, or the embedded default when
// the project has none.
func LoadProject(project string) (*Policy, error) {
	path := ProjectPath(project)
	if _, err := os.Stat(path); err == nil {
		return LoadFile(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, uerr.Wrap(err, CodeRead, "cannot read "+path, err.Error(), "check its permissions")
	}
	return Default()
}
