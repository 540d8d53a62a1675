package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/daemon"
)

// The session commands talk to the project's kernel (started if needed),
// which serves the project's current session; resuming another one, or
// archiving the current one, makes it exit so the next command starts it
// on the new current session.

// sessionOpts are the flags of every session subcommand.
type sessionOpts struct {
	project *string
	asJSON  *bool
	force   *bool // archive only
}

func declareSessionFlags(fs *flag.FlagSet, archive bool) *sessionOpts {
	o := &sessionOpts{project: projectDirFlag(fs), asJSON: fs.Bool("json", false, "machine-readable output")}
	if archive {
		o.force = fs.Bool("force", false, "drop the session's proposed changes not merged (they are lost; listed and audited) instead of refusing")
	}
	return o
}

// sessionFlags makes the flags func of a session subcommand that runs f.
func sessionFlags(archive bool, f func(e *env, o *sessionOpts, pos []string) error) func(*env, *flag.FlagSet) func([]string) error {
	return func(e *env, fs *flag.FlagSet) func([]string) error {
		o := declareSessionFlags(fs, archive)
		return func(pos []string) error { return f(e, o, pos) }
	}
}

func sessionCall(e *env, o *sessionOpts, pos []string, method string, out any) (taskFlags, *session, error) {
	project, asJSON, force := o.project, o.asJSON, o.force
	f := taskFlags{project: *project, json: *asJSON}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := openSession(ctx, e, f, func(m string) { fmt.Fprintf(e.stderr, "  %s…\n", m) })
	if err != nil {
		return f, nil, err
	}
	defer s.client().Close()
	p := daemon.SessionParams{}
	if len(pos) == 1 {
		p.Session = pos[0]
	}
	if force != nil {
		p.Force = *force
	}
	return f, s, s.call(ctx, method, p, out)
}

func sessionList(e *env, o *sessionOpts, pos []string) error {
	var list []daemon.SessionInfo
	f, _, err := sessionCall(e, o, pos, daemon.MethodSessionList, &list)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(jsonOut{e.stdout}, list)
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tID\tUPDATED\tMODE\tSTATE\tPENDING\tTITLE")
	for _, s := range list {
		title := safeLine(s.Title, 60)
		if s.Archived {
			title = "(archived) " + title
		}
		cur := ""
		if s.Current {
			cur = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", cur, s.ID, s.Updated, s.Mode, s.State, s.Pending, title)
	}
	return tw.Flush()
}

func sessionShow(e *env, o *sessionOpts, pos []string) error {
	var st json.RawMessage
	if _, _, err := sessionCall(e, o, pos, daemon.MethodSessionShow, &st); err != nil {
		return err
	}
	return writeJSON(jsonOut{e.stdout}, st)
}

func sessionResume(e *env, o *sessionOpts, pos []string) error {
	var res daemon.ResumeResult
	f, s, err := sessionCall(e, o, pos, daemon.MethodSessionResume, &res)
	if err != nil {
		return err
	}
	if res.Restart {
		waitKernelExit(e, s.boot.paths.Lock)
	}
	if f.json {
		return writeJSON(jsonOut{e.stdout}, res)
	}
	si := res.Session
	fmt.Fprintf(e.stdout, "session %s resumed: %s mode, state %s, %d pending change(s); run `fluffy` to continue it\n", si.ID, si.Mode, si.State, si.Pending)
	return nil
}

func sessionArchive(e *env, o *sessionOpts, pos []string) error {
	var res daemon.ArchiveResult
	f, s, err := sessionCall(e, o, pos, daemon.MethodSessionArchive, &res)
	if err != nil {
		return err
	}
	if res.Restart {
		waitKernelExit(e, s.boot.paths.Lock)
	}
	if f.json {
		return writeJSON(jsonOut{e.stdout}, res)
	}
	fmt.Fprintf(e.stdout, "session %s archived (resume it with `fluffy session resume %s`)\n", res.Archived, res.Archived)
	if len(res.Dropped) > 0 {
		fmt.Fprintf(e.stdout, "dropped %d proposed change(s) (--force):\n", len(res.Dropped))
		for _, p := range res.Dropped {
			fmt.Fprintf(e.stdout, "  %s\n", safeLine(p, 200))
		}
	}
	if res.Restart {
		fmt.Fprintf(e.stdout, "new session %s is current\n", res.Current)
	}
	return nil
}

func sessionNew(e *env, o *sessionOpts, pos []string) error {
	var res daemon.ArchiveResult
	f, s, err := sessionCall(e, o, pos, daemon.MethodSessionNew, &res)
	if err != nil {
		return err
	}
	waitKernelExit(e, s.boot.paths.Lock)
	if f.json {
		return writeJSON(jsonOut{e.stdout}, res)
	}
	fmt.Fprintf(e.stdout, "new session %s is current; the previous one is kept as it was (`fluffy session list`)\n", res.Current)
	return nil
}

// waitKernelExit waits until the kernel that switched sessions has gone
// (its lock is free), so the next command starts one on the new current
// session instead of reaching the exiting one.
func waitKernelExit(e *env, lock string) bool {
	deadline := time.Now().Add(time.Minute)
	for !lockFree(lock) {
		if time.Now().After(deadline) {
			fmt.Fprintln(e.stderr, "warning: the kernel has not exited yet; the next command may still reach it (stop it with `fluffy kernel stop`)")
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// runAttach implements `fluffy attach`: follow the project's running (or
// last) task from where this terminal left it.
func runAttachFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	asJSON := fs.Bool("json", false, "print events as JSON lines")
	after := fs.Int64("after", 0, "`SEQ` only events after this sequence number")
	return func([]string) error { return runAttach(e, project, asJSON, after) }
}

func runAttach(e *env, project *string, asJSON *bool, after *int64) error {
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
