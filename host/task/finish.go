package task

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/commit"
	"github.com/fluffy-waffle/fluffy/host/merge"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// vcsPlugin commits merged changes.
const vcsPlugin = "vcs-git"

// maxReviewDiff bounds one file's diff in a review event (the whole diff
// stays in the merge; the person sees the head).
const maxReviewDiff = 64 << 10

// finisher is agent.Finisher: once the workflow reached reviewing, the
// changeset is planned as a merge, approved automatically (merge.Auto's
// criteria) or by the person at the terminal, applied atomically to the
// project, committed by the VCS plugin, and the workflow goes back to idle.
type finisher struct{ t *Tasks }

func (f *finisher) Reached(ctx context.Context, emit func(agent.Event)) (agent.Finish, error) {
	t := f.t
	if t.m.State() != string(state.Reviewing) {
		return agent.Finish{}, nil
	}
	k := t.k
	changes := k.Session.Changes()
	review, err := t.merger.Plan(ctx, k.Workspace, changes)
	if err != nil {
		return agent.Finish{}, err
	}
	review.Model = t.o.Model
	green := false
	if st := t.m.Status(); st.LastRun != nil {
		green = st.LastRun.Status == "green"
	}
	dec := t.merger.Auto(review, green)
	approval := router.Approval{Approved: true, By: "auto", Scope: router.ScopeOnce}
	t.mu.Lock()
	unattended := !t.interactive && !t.yes
	t.mu.Unlock()
	if dec.Auto && unattended {
		// Nobody is at a terminal and nobody said --yes: even a change
		// that meets the criteria waits for a person.
		return agent.Finish{Done: true, Status: agent.StatusStopped,
			Summary: fmt.Sprintf("the change is ready (tests pass, %d changed lines) and waits for you: run `fluffy` in the project to review it, or rerun with --yes to merge what meets the auto-merge criteria", review.Lines)}, nil
	}
	if dec.Auto {
		emit(agent.Event{Type: agent.EventNotice, Text: fmt.Sprintf("auto-merge: tests pass, no sensitive path, %d changed lines (limit %d)", review.Lines, t.autoMax())})
	} else {
		approval, err = t.review(ctx, agent.ReviewEvent{Kind: "merge", Summary: "merge " + plural(len(review.Files), "file") + ": " + strings.Join(dec.Reasons, "; "),
			Files: reviewFiles(review), Scopes: []string{router.ScopeOnce}})
		if err != nil {
			if uerr.HasCode(err, CodeReviewNeeded) {
				return agent.Finish{Done: true, Status: agent.StatusStopped,
					Summary: "the change is ready and needs your review (" + strings.Join(dec.Reasons, "; ") + "): run `fluffy` in the project and answer /approve or /reject"}, nil
			}
			return agent.Finish{}, err
		}
	}
	if !approval.Approved {
		if err := t.merger.Reject(ctx, review, approval.Note); err != nil {
			t.log.Warn("cannot record the rejection", "error", err)
		}
		if _, err := t.m.Review(ctx, state.Approval{Approved: false, By: approval.By, Note: approval.Note}); err != nil {
			return agent.Finish{}, err
		}
		if strings.TrimSpace(approval.Note) == "" {
			return agent.Finish{Done: true, Status: agent.StatusRejected, Summary: "you rejected the change; it stays proposed in the session"}, nil
		}
		return agent.Finish{Feedback: approval.Note}, nil
	}
	if _, err := t.m.Review(ctx, state.Approval{Approved: true, By: approval.By, Auto: dec.Auto, Note: approval.Note}); err != nil {
		return agent.Finish{}, err
	}
	paths := approval.Files
	if len(paths) == 0 {
		paths = review.Paths()
	}
	review.By = approval.By
	op, err := t.merger.Apply(ctx, review, paths)
	if err != nil {
		return agent.Finish{}, err
	}
	landed := op.Landed()
	emit(agent.Event{Type: agent.EventNotice, Text: "merged " + plural(len(landed), "file") + ": " + strings.Join(landed, ", ")})
	fin := agent.Finish{Done: true, Status: agent.StatusDone, Files: landed}
	ref := ""
	if _, ok := k.Plugins.Spec(vcsPlugin); !ok {
		emit(agent.Event{Type: agent.EventNotice, Text: "merged; not committed: the vcs-git plugin is not loaded"})
	} else if len(landed) > 0 {
		// The commit carries what the merge wrote (checked against its
		// hashes), not what the project holds now.
		req, err := commit.FromMerge(op, commitMessage(t.taskText()), "fluffy", "fluffy@localhost")
		var cr commit.Result
		if err == nil {
			cr, err = commit.Commit(ctx, k.Plugins, vcsPlugin, k.Workspace, req)
		}
		switch {
		case err != nil:
			emit(agent.Event{Type: agent.EventError, Error: uerr.From(err)})
			fin.Summary = "merged, but the commit failed: " + uerr.From(err).What
		case cr.Skipped:
			emit(agent.Event{Type: agent.EventNotice, Text: cr.Reason})
		default:
			ref, fin.Commit = cr.Commit, cr.Commit
			emit(agent.Event{Type: agent.EventNotice, Text: "committed " + short(cr.Commit) + " on " + strings.TrimPrefix(cr.Branch, "refs/heads/")})
			if cr.Warning != "" {
				emit(agent.Event{Type: agent.EventNotice, Text: cr.Warning})
			}
		}
	}
	if fin.Summary == "" {
		fin.Summary = "merged " + plural(len(landed), "file") + " with the tests passing"
		if fin.Commit != "" {
			fin.Summary += "; committed " + short(fin.Commit)
		}
	}
	if len(landed) == 0 {
		// Discard with no paths drops everything: nothing landed, keep all.
	} else if err := k.Session.Discard(landed...); err != nil {
		t.log.Warn("cannot drop merged changes from the session", "error", err)
	}
	if _, err := t.m.Committed(ctx, ref); err != nil {
		t.log.Warn("workflow after commit", "error", err)
	}
	return fin, nil
}

func (t *Tasks) autoMax() int {
	if t.o.AutoMaxLines > 0 {
		return t.o.AutoMaxLines
	}
	return merge.DefaultAutoMaxLines
}

func (t *Tasks) taskText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.task
}

// sensitive is merge.Sensitive over the policy: a path whose fs.write the
// policy sends to review is never merged without a person.
func (t *Tasks) sensitive(ctx context.Context, path string) []string {
	res := t.k.Policy.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: path, Caller: t.k.Providers.ModelCaller(), SessionMode: string(t.m.Position().Mode), State: t.m.State()})
	if res.Enforced != policy.RequireReview {
		return nil
	}
	var why []string
	for _, d := range res.Deciding {
		if d.Reason != "" {
			why = append(why, d.Reason)
		} else {
			why = append(why, "rule "+d.Rule)
		}
	}
	if len(why) == 0 {
		why = []string{"the policy asks for a review"}
	}
	return why
}

func reviewFiles(r *merge.Review) []agent.ReviewFile {
	out := make([]agent.ReviewFile, 0, len(r.Files))
	for _, f := range r.Files {
		d := f.Diff
		if len(d) > maxReviewDiff {
			d = d[:maxReviewDiff] + "\n… (diff cut at 64 KiB)\n"
		}
		out = append(out, agent.ReviewFile{Path: f.Path, Added: f.Added, Removed: f.Removed, Diff: d, Conflict: f.Conflict, Deleted: f.Delete, Created: f.Create})
	}
	return out
}

func commitMessage(task string) string {
	task = strings.TrimSpace(task)
	first, _, _ := strings.Cut(task, "\n")
	if len([]rune(first)) > 72 {
		first = string([]rune(first)[:71]) + "…"
	}
	if first == "" {
		first = "fluffy change"
	}
	return first + "\n\nMade test-first by fluffy; every step is in the project's audit log (fluffy audit log).\n"
}

func plural(n int, w string) string {
	if n == 1 {
		return "1 " + w
	}
	return fmt.Sprintf("%d %ss", n, w)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
