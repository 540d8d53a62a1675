// Package pin keeps the user's approval of project policy files: a cloned
// repository's `.fluffy/policy.yaml` can ship anything (`mode: observe`,
// an allow-everything rule), so it applies only once the user approved its
// exact content. The approval is the file's sha256, pinned in a record under
// $FLUFFY_HOME/trust/policies (one file per project, keyed by the project's
// canonical path, 0600, written atomically without following links). Until
// the content on disk is approved the embedded default policy applies, and
// the policy returned by Load says so (policy.Unapproved).
//
// Approvals are made by `fluffy policy trust` (the person reviewed the file)
// and by the reviewed write paths (`fluffy policy update`, a review's
// "always"), which pin the content they write (Store.Written). Any other
// change of the file un-pins it.
//
// It must not decide anything else about a policy (package policy does),
// nor write the project's policy file itself.
package pin
