package policy

import (
	"fmt"
	"path/filepath"
)

// ProjectPath is where a project's policy lives.
func ProjectPath(project string) string {
	return filepath.Join(project, ".fluffy", "policy.yaml")
}

// Unapproved is a project policy file that is not in force because its
// content is not the one the user approved: a cloned repository can ship
// any policy (`mode: observe`, an allow-everything rule), so its file
// applies only once approved (`fluffy policy trust`), and only while it is
// unchanged. Package policy/pin decides; this records the outcome on the
// policy applied instead.
type Unapproved struct {
	Path string // the project's policy file
	Hash string // sha256 of its content now
	// Changed: another content of this file was approved before (it was
	// edited since, not through `fluffy policy update`).
	Changed bool
}

// Notice is the one-line message that says which policy applies and how
// to change that.
func (u *Unapproved) Notice() string {
	why := "is not trusted yet"
	if u.Changed {
		why = "changed since you trusted it"
	}
	return fmt.Sprintf("%s %s: the embedded default policy applies; review it and run `fluffy policy trust` to use it", u.Path, why)
}
