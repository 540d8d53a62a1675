// Package merge owns reviewing a session's changeset and applying it to the
// project: Plan turns workspace changes into a reviewable unified diff per
// file (line counts, changed ranges with the sha256 of their new lines,
// conflicts where the project file no longer has the hash the session
// wrote against); Auto applies the auto-merge criteria (tests green
// as told by the caller, no path sensitive by policy, no conflict or
// binary file, at most merge.auto_max_lines lines); Apply lands approved
// files atomically (temp file in the same directory, fsync, rename,
// directory fsync, mode preserved) after writing the merge log (the
// MergeOperation, store.PrefixMerge) to the project database, so that
// Resume finishes or reports a merge a killed kernel left; Reject records
// a refusal. merge_approved and merge_rejected are audited per file with
// every changed range, the session and the model.
//
// It must not decide whether a change is allowed (the policy does, through
// the Sensitive callback and the changes' review marks) or who approves
// it (the caller), must never overwrite a file the user changed, and
// writes the project only through package confine's root (no symbolic
// link is followed out of it). It does not commit: the vcs plugin does.
package merge
