package kernelapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Service serves the task, session and audit methods of one kernel. When
// the task runner could not be opened (no provider), the task methods
// answer with why, and the session methods still work where they can.
type Service struct {
	d       *daemon.Daemon
	k       *kernel.Kernel
	t       *task.Tasks // nil: tasks are not possible, see openErr
	openErr error
	// cancelOnDisconnect is agent.on_disconnect: cancel.
	cancelOnDisconnect bool
	facts              sessionFacts
}

// Register registers every method of s on its daemon.
func (s *Service) Register() {
	for name, m := range map[string]daemon.Method{
		daemon.MethodTaskRun:        s.taskRun,
		daemon.MethodTaskAttach:     s.taskAttach,
		daemon.MethodTaskCancel:     s.taskCancel,
		daemon.MethodReviewRespond:  s.reviewRespond,
		daemon.MethodSessionPrompt:  s.sessionPrompt,
		daemon.MethodSessionStatus:  s.sessionStatus,
		daemon.MethodSessionBudget:  s.sessionStatus,
		daemon.MethodSessionShow:    s.sessionShow,
		daemon.MethodSessionList:    s.sessionList,
		daemon.MethodSessionResume:  s.sessionResume,
		daemon.MethodSessionNew:     s.sessionNew,
		daemon.MethodSessionArchive: s.sessionArchive,
		daemon.MethodSessionUndo:    s.sessionUndo,
		daemon.MethodSessionPin:     s.sessionPin,
		daemon.MethodSessionMode:    s.sessionMode,
	} {
		s.d.Handle(name, m)
	}
	registerAudit(s.d, s.k.Audit)
}

// need is nil when tasks can run, else why not.
func (s *Service) need() error {
	if s.t == nil {
		return s.openErr
	}
	return nil
}

func (s *Service) running() bool { return s.t != nil && s.t.Running() }

func (s *Service) taskRun(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	var p daemon.TaskParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	// agent.on_disconnect: continue (default) lets the task outlive its
	// client (events keep flowing to `fluffy attach`, and the daemon does
	// not exit idle under it); cancel ends it with the connection.
	defer s.d.Busy()()
	s.k.TouchSession(p.Prompt)
	tctx := context.WithoutCancel(ctx)
	if s.cancelOnDisconnect {
		tctx = ctx
	}
	done, err := s.t.Run(tctx, task.Request{Prompt: p.Prompt, Yes: p.Yes, Interactive: p.Interactive, Mode: p.Mode,
		Provider: ProviderPlugin(p.Provider), Model: p.Model, ProviderConfig: p.ProviderConfig, Record: p.Record, MaxCostUSD: p.MaxCostUSD, ProviderName: p.Provider},
		func(ev agent.Event) { _ = req.Emit(ev) })
	if err != nil {
		return nil, err
	}
	s.k.SaveConversation(s.t.Agent().Conversation())
	return done, nil
}

func (s *Service) sessionPrompt(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	sys, n := s.t.Agent().SystemPrompt()
	return daemon.PromptResult{System: sys, Tokens: n}, nil
}

func (s *Service) taskAttach(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	var p daemon.AttachParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	var last *agent.DoneEvent
	err := s.t.Attach(ctx, p.AfterSeq, func(ev agent.Event) {
		if ev.Done != nil {
			last = ev.Done
		}
		_ = req.Emit(ev)
	})
	if err != nil {
		return nil, err
	}
	if last == nil {
		last = &agent.DoneEvent{Status: "running", Reason: "the task is still running"}
	}
	return last, nil
}

func (s *Service) taskCancel(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	return map[string]bool{"cancelled": true}, s.t.Cancel()
}

func (s *Service) reviewRespond(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	var p daemon.ReviewResponse
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	a := router.Approval{Approved: p.Decision == "approve", Scope: p.Scope, By: "user", Note: p.Reason}
	if a.Scope == "" {
		a.Scope = router.ScopeOnce
	}
	// The scope must be one the review offered (Respond checks it):
	// "always" proposes a policy.update, reviewed on its own.
	if p.Decision != "approve" && p.Decision != "reject" {
		return nil, uerr.New("REVIEW_BAD_DECISION", fmt.Sprintf("decision %q", textsafe.Line(p.Decision, 40)), "a review is answered with approve or reject", "answer /approve or /reject")
	}
	a.Files = p.Files
	return map[string]bool{"ok": true}, s.t.Respond(p.ReviewID, a)
}

func (s *Service) sessionStatus(ctx context.Context, req *ipc.Request) (any, error) {
	return s.status(), nil
}

func (s *Service) sessionShow(ctx context.Context, req *ipc.Request) (any, error) {
	var p daemon.SessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	id := p.Session
	if id == "" {
		id = s.k.Session.ID()
	}
	sum, err := s.k.DescribeSession(id)
	if err != nil {
		return nil, err
	}
	hist, err := s.k.SessionHistory(id, 50)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"session": sessionInfo(sum), "history": hist}
	var conv agent.Conversation
	if sum.Current && s.t != nil {
		out["status"], out["workflow"] = s.status(), s.t.Machine().Status()
		conv = s.t.Agent().Conversation()
	} else {
		if sum.Current {
			out["status"] = s.status()
		}
		if conv, err = s.k.SavedConversation(id); err != nil {
			return nil, err
		}
	}
	out["conversation"] = map[string]any{"messages": len(conv.Messages), "summarized": conv.Summary != "", "pins": conv.Pins}
	return out, nil
}

func (s *Service) sessionList(ctx context.Context, req *ipc.Request) (any, error) {
	all, err := s.k.ListSessions()
	if err != nil {
		return nil, err
	}
	out := make([]daemon.SessionInfo, 0, len(all))
	for _, sum := range all {
		out = append(out, sessionInfo(sum))
	}
	return out, nil
}

// Resuming or archiving the served session changes the project's current
// one: the kernel (one session per process) answers, then exits, and the
// CLI's bootstrap starts it on the new current session.

func (s *Service) sessionResume(ctx context.Context, req *ipc.Request) (any, error) {
	var p daemon.SessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	sum, sw, err := s.k.ResumeSession(p.Session, s.running())
	if err != nil {
		return nil, err
	}
	if sw {
		s.d.Shutdown()
	}
	return daemon.ResumeResult{Session: sessionInfo(sum), Restart: sw}, nil
}

func (s *Service) sessionNew(ctx context.Context, req *ipc.Request) (any, error) {
	id, err := s.k.NewSession(s.running())
	if err != nil {
		return nil, err
	}
	s.d.Shutdown()
	return daemon.ArchiveResult{Current: id, Restart: true}, nil
}

func (s *Service) sessionArchive(ctx context.Context, req *ipc.Request) (any, error) {
	var p daemon.SessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	res, err := s.k.ArchiveSession(ctx, p.Session, p.Force, s.running())
	if err != nil {
		return nil, err
	}
	if res.Switch {
		s.d.Shutdown()
	}
	return daemon.ArchiveResult{Archived: res.Archived, Dropped: res.Dropped, Current: res.Current, Restart: res.Switch}, nil
}

// sessionUndo drops the session's newest proposed change.
func (s *Service) sessionUndo(ctx context.Context, req *ipc.Request) (any, error) {
	if s.running() {
		return nil, uerr.New(task.CodeTaskRunning, "a task is running", "/undo changes the session's proposed changes, which the running task works on", "wait for the task or cancel it first")
	}
	var last *workspace.Change
	for _, c := range s.k.Session.Changes() {
		if last == nil || c.Time.After(last.Time) {
			c := c
			last = &c
		}
	}
	if last == nil {
		return nil, uerr.New("UNDO_NOTHING", "there is no proposed change to drop", "the session's changeset is empty", "nothing to do")
	}
	if err := s.k.Session.Discard(last.Path); err != nil {
		return nil, err
	}
	return map[string]string{"path": last.Path}, nil
}

func (s *Service) sessionPin(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	var p daemon.SessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Text) == "" {
		return nil, uerr.New("USAGE", "nothing to pin", "/pin keeps a text in every request of the session", "type /pin TEXT")
	}
	s.t.Agent().Pin(p.Text)
	s.k.SaveConversation(s.t.Agent().Conversation())
	return map[string]bool{"ok": true}, nil
}

func (s *Service) sessionMode(ctx context.Context, req *ipc.Request) (any, error) {
	if err := s.need(); err != nil {
		return nil, err
	}
	var p daemon.SessionParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	if _, err := s.t.Machine().SetMode(ctx, state.ModeRequest{Mode: state.Mode(p.Mode), Caller: policy.Caller{Kind: "user"}, Reason: "asked in the REPL"}); err != nil {
		return nil, err
	}
	return s.status(), nil
}

// sessionInfo is the wire form of a session summary.
func sessionInfo(s kernel.SessionSummary) daemon.SessionInfo {
	return daemon.SessionInfo{ID: s.ID, Created: s.Created.UTC().Format(time.RFC3339), Updated: s.Updated.UTC().Format(time.RFC3339),
		Mode: s.Mode, State: s.State, Pending: s.Pending, Archived: s.Archived, Current: s.Current, Title: s.Title}
}

func decodeParams(req *ipc.Request, v any) error {
	if len(req.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Params, v); err != nil {
		return uerr.Wrap(err, "IPC_BAD_PARAMS", "the parameters of "+req.Method+" are not valid", err.Error(), "use a fluffy CLI of the same version as the kernel")
	}
	return nil
}
