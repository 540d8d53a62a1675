package task

import (
	"context"

	"github.com/fluffy-waffle/fluffy/host/commit"
	"github.com/fluffy-waffle/fluffy/host/merge"
	"github.com/fluffy-waffle/fluffy/host/state"
)

// finishInterruptedCommit completes a task a killed kernel left between
// its merge and the end of its commit (the workflow still in committing):
// the last merge of the session is committed unless HEAD already is its
// commit, its files leave the changeset, and the workflow goes back to
// idle, as the finisher would have done. Without this the session stays in
// committing for good, its merged files uncommitted and still proposed.
// A commit that fails now is logged and the workflow still moves on: the
// merged files are in the project for the person to commit, as after a
// commit failure in a running task.
func (t *Tasks) finishInterruptedCommit(ctx context.Context) {
	if t.m.State() != string(state.Committing) {
		return
	}
	k := t.k
	ops, err := t.merger.Operations(false)
	if err != nil {
		t.log.Error("an interrupted commit could not be finished: the merge log is unreadable", "error", err)
		return
	}
	var op *merge.Operation
	for _, o := range ops {
		if o.Session == k.Session.ID() && o.State == merge.OpDone && (op == nil || o.Started.After(op.Started)) {
			op = o
		}
	}
	var landed []string
	if op != nil {
		landed = op.Landed()
	}
	ref := ""
	if _, ok := k.Plugins.Spec(vcsPlugin); ok && len(landed) > 0 {
		req, err := commit.FromMerge(op, commitMessage(t.m.Status().Task), "fluffy", "fluffy@localhost")
		if err == nil {
			var done bool
			if ref, done, err = commit.Landed(k.Workspace, req); err == nil && !done {
				var cr commit.Result
				cr, err = commit.Commit(ctx, k.Plugins, vcsPlugin, k.Workspace, req)
				ref = cr.Commit
			}
		}
		if err != nil {
			ref = ""
			t.log.Error("the commit of an interrupted task failed; its merged files are in the project, uncommitted", "operation", op.ID, "files", landed, "error", err)
		}
	}
	if len(landed) > 0 {
		if err := k.Session.Discard(landed...); err != nil {
			t.log.Warn("cannot drop merged changes from the session", "error", err)
		}
	}
	if _, err := t.m.Committed(ctx, ref); err != nil {
		t.log.Error("the workflow of an interrupted commit could not be finished", "error", err)
		return
	}
	t.log.Warn("finished the commit of an interrupted task", "commit", ref, "files", landed)
}
