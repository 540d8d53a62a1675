package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/daemon"
)

// runSession implements `fluffy session list|show|resume`: the project's
// session, kept by its kernel (started if needed). A project's kernel
// serves one session; it cannot be archived.
func runSession(e *env, args []string) error {
	return subcommands(e, "session", args, map[string]func(*env, []string) error{
		"list":   sessionList,
		"show":   sessionShow,
		"resume": sessionResume,
	})
}

func sessionCall(e *env, args []string, name string, wantID bool, method string, out any) (taskFlags, error) {
	fs := newFlags("session " + name)
	project := fs.String("project", ".", "project directory")
	asJSON := fs.Bool("json", false, "machine-readable output")
	pos, err := parseInterspersed(fs, args)
	if err != nil || (wantID && len(pos) != 1) || (!wantID && len(pos) != 0) {
		u := "usage: fluffy session " + name
		if wantID {
			u += " ID"
		}
		return taskFlags{}, usageErr("session "+name, "unexpected arguments", u+" [--project DIR] [--json]")
	}
	f := taskFlags{project: *project, json: *asJSON}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := openSession(ctx, e, f, func(m string) { fmt.Fprintf(e.stderr, "  %s…\n", m) })
	if err != nil {
		return f, err
	}
	defer s.client().Close()
	p := daemon.SessionParams{}
	if wantID {
		p.Session = pos[0]
	}
	return f, s.call(ctx, method, p, out)
}

func sessionList(e *env, args []string) error {
	var list []daemon.SessionInfo
	f, err := sessionCall(e, args, "list", false, daemon.MethodSessionList, &list)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(jsonOut{e.stdout}, list)
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tMODE\tSTATE\tPENDING\tTITLE")
	for _, s := range list {
		title := safeLine(s.Title, 60)
		if s.Archived {
			title = "(archived) " + title
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, s.Updated, s.Mode, s.State, s.Pending, title)
	}
	return tw.Flush()
}

func sessionShow(e *env, args []string) error {
	var st json.RawMessage
	if _, err := sessionCall(e, args, "show", true, daemon.MethodSessionShow, &st); err != nil {
		return err
	}
	return writeJSON(jsonOut{e.stdout}, st)
}

func sessionResume(e *env, args []string) error {
	var st daemon.SessionStatus
	if _, err := sessionCall(e, args, "resume", true, daemon.MethodSessionResume, &st); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "session %s resumed: %s mode, state %s, %d pending change(s); run `fluffy` to continue it\n", st.Session, st.Mode, st.State, st.Pending)
	return nil
}

// runAttach implements `fluffy attach`: follow the project's running (or
// last) task from where this terminal left it.
func runAttach(e *env, args []string) error {
	fs := newFlags("attach")
	project := fs.String("project", ".", "project directory")
	asJSON := fs.Bool("json", false, "print events as JSON lines")
	after := fs.Int64("after", 0, "only events after this sequence number")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return usageErr("attach", "unexpected arguments", "usage: fluffy attach [--project DIR] [--json] [--after SEQ]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, err := openSession(ctx, e, taskFlags{project: *project}, nil)
	if err != nil {
		return err
	}
	defer s.client().Close()
	r := newRenderer(e.stdout, colorOn(e, s.cfg), stdoutIsTTY(e))
	defer r.Close()
	enc := json.NewEncoder(e.stdout)
	res, err := s.client().Call(ctx, daemon.MethodTaskAttach, daemon.AttachParams{AfterSeq: *after}, func(b json.RawMessage) {
		var ev agent.Event
		if json.Unmarshal(b, &ev) != nil {
			return
		}
		if *asJSON {
			_ = enc.Encode(ev)
			return
		}
		r.Event(ev)
	})
	if err != nil {
		return err
	}
	var done agent.DoneEvent
	if json.Unmarshal(res, &done) == nil && done.Status != "" && done.Status != agent.StatusDone {
		return exitStatus(agent.ExitCode(done.Status))
	}
	return nil
}

// exitStatus makes a command exit with code without printing an error.
type exitStatus int

func (c exitStatus) Error() string { return fmt.Sprintf("exit %d", int(c)) }
func (c exitStatus) ExitCode() int { return int(c) }
