package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// taskFlags are the flags of `fluffy [flags] ["task"]`.
type taskFlags struct {
	mode, provider, model, l1, project string
	record                             string
	yes, json                          bool
	prompt                             string
	maxCost                            float64
}

// declareTaskFlags declares the task flags on fs, into f: the root
// command's flags, which help lists and the dispatcher parses.
func declareTaskFlags(fs *flag.FlagSet, f *taskFlags) {
	fs.StringVar(&f.mode, "mode", "", "`strict|explore|debug` the workflow mode to start in (explore and debug go through the policy)")
	fs.StringVar(&f.provider, "provider", "", "`openai|anthropic|ollama|replay` the AI provider of this task (beats FLUFFY_PROVIDER and the config files)")
	fs.StringVar(&f.model, "model", "", "`NAME` the model of this task (beats FLUFFY_MODEL and the config files; default: the provider's)")
	fs.StringVar(&f.l1, "l1", "", "`docker|none` where the kernel runs, an L1 container or a local process")
	fs.StringVar(&f.project, "project", ".", "`DIR` the project directory")
	fs.BoolVar(&f.yes, "yes", false, "without a terminal, merge a change that meets the auto-merge criteria (tests pass, nothing\nthe policy sends to review, at most merge.auto_max_lines); never answers a review")
	fs.BoolVar(&f.json, "json", false, "print the event stream as JSON lines (for scripts and CI)")
	fs.StringVar(&f.record, "record", "", "`FILE` write the task's model turns to a new cassette (mode 0600, no secrets) that\nprovider-replay plays back offline")
	fs.Float64Var(&f.maxCost, "max-cost", 0, "`USD` stop the task once it cost this many US dollars (beats agent.max_cost_usd; acts when the model's\nprices are known)")
}

// rootFlags is the root command: `fluffy [flags] [TASK...]` runs one task,
// or the interactive shell when there is no task.
func rootFlags(e *env, fs *flag.FlagSet) func([]string) error {
	var f taskFlags
	declareTaskFlags(fs, &f)
	return func(pos []string) error {
		f.prompt = strings.TrimSpace(strings.Join(pos, " "))
		if near := nearCommand(f.prompt, commandTree()); near != "" {
			return uerr.New("USAGE", fmt.Sprintf("unknown command %q", textsafe.Line(f.prompt, maxQuoted)),
				"it looks like a mistyped command, not a task", fmt.Sprintf("did you mean `fluffy %s`? To run it as a task, write a sentence: fluffy \"...\"", near))
		}
		code := 0
		if f.prompt == "" {
			if f.record != "" {
				return usageErr("", "--record needs a task: it records one task's model turns, the interactive shell does not record", `give the task on the command line: fluffy --record FILE "..."`)
			}
			code = runREPL(e, f)
		} else {
			code = runOneShot(e, f)
		}
		if code != 0 {
			return exitStatus(code)
		}
		return nil
	}
}

// flagValues turns the set flags into config keys (flags win over all).
func (f taskFlags) flagValues() map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{"mode": f.mode, "provider": f.provider, "model": f.model, "l1": f.l1} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// loadTaskConfig reads the settings a task runs with: the flags, then
// FLUFFY_*, then the project's and the user's config files.
func loadTaskConfig(e *env, f taskFlags) (*config.Config, error) {
	project, err := existingDir(f.project)
	if err != nil {
		return nil, err
	}
	return config.Load(config.Options{UserFile: config.UserFile(e.home), ProjectFile: config.ProjectFile(project), Getenv: e.getenv, Flags: f.flagValues()})
}

// session connects to (starting if needed) the project's kernel.
type session struct {
	e       *env
	cfg     *config.Config
	project string
	boot    *bootstrap
	mu      sync.Mutex
	cl      *ipc.Client
}

func openSession(ctx context.Context, e *env, f taskFlags, progress func(string)) (*session, error) {
	project, err := existingDir(f.project)
	if err != nil {
		return nil, err
	}
	cfg, err := loadTaskConfig(e, f)
	if err != nil {
		return nil, err
	}
	b := newBootstrap(e, project, cfg.String("l1") == "docker", progress)
	cl, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &session{e: e, cfg: cfg, project: project, boot: b, cl: cl}, nil
}

func (s *session) client() *ipc.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cl
}

// supervise keeps the kernel alive for the life of ctx (restarts within
// the bootstrap's limit); onFatal hears when it gives up.
func (s *session) supervise(ctx context.Context, onFatal func(error)) {
	go func() {
		if err := s.boot.supervise(ctx, s.client(), superviseInterval, func(n *ipc.Client) {
			s.mu.Lock()
			s.cl = n
			s.mu.Unlock()
		}); err != nil {
			onFatal(err)
		}
	}()
}

func (s *session) call(ctx context.Context, method string, params any, out any) error {
	res, err := s.client().Call(ctx, method, params, nil)
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(res, out)
	}
	return nil
}

// reviewer answers review_requested events for a person at a terminal.
type reviewer interface {
	review(ctx context.Context, rv *agent.ReviewEvent) (daemon.ReviewResponse, error)
}

// runTask runs one task to its end: events go to the renderer (or as JSON
// lines), reviews to rev (nil: none possible), Ctrl-C cancels the task,
// a second Ctrl-C abandons it. It returns the final done event.
func (s *session) runTask(ctx context.Context, p daemon.TaskParams, render func(agent.Event), rev reviewer) (*agent.DoneEvent, error) {
	reviews := make(chan *agent.ReviewEvent, 8)
	var done *agent.DoneEvent
	type result struct {
		raw json.RawMessage
		err error
	}
	resc := make(chan result, 1)
	tctx, abandon := context.WithCancel(ctx)
	defer abandon()
	go func() {
		raw, err := s.client().Call(tctx, daemon.MethodTaskRun, p, func(b json.RawMessage) {
			var ev agent.Event
			if json.Unmarshal(b, &ev) != nil {
				return
			}
			render(ev)
			if ev.Type == agent.EventReviewRequested && ev.Review != nil {
				reviews <- ev.Review
			}
		})
		resc <- result{raw, err}
	}()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	cancelled := false
	for {
		select {
		case r := <-resc:
			if r.err != nil {
				return nil, r.err
			}
			if err := json.Unmarshal(r.raw, &done); err != nil || done == nil {
				return nil, fmt.Errorf("kernel answered task.run with %s", r.raw)
			}
			return done, nil
		case rv := <-reviews:
			if rev == nil {
				continue // the kernel stops the task itself when nobody can answer
			}
			resp, err := rev.review(tctx, rv)
			if err != nil {
				// No answer can come (the input ended): say no rather than
				// leave the kernel waiting on the review.
				resp = daemon.ReviewResponse{Decision: "reject", Reason: "the review prompt closed before an answer"}
			}
			resp.ReviewID, resp.Session = rv.ID, p.Session
			if err := s.call(ctx, daemon.MethodReviewRespond, resp, nil); err != nil {
				fmt.Fprint(s.e.stderr, uerr.From(err).Render())
			}
		case <-sig:
			if cancelled {
				return &agent.DoneEvent{Status: agent.StatusCancelled, Reason: "abandoned (second Ctrl-C)"}, nil
			}
			cancelled = true
			fmt.Fprintln(s.e.stderr, "\n  cancelling… (Ctrl-C again to leave without waiting)")
			go func() { _ = s.call(ctx, daemon.MethodTaskCancel, daemon.CancelParams{Session: p.Session}, nil) }()
		}
	}
}

// lineReviewer asks on a plain line-based terminal (one-shot runs).
type lineReviewer struct {
	in  *bufio.Reader
	out io.Writer
}

func (l lineReviewer) review(_ context.Context, rv *agent.ReviewEvent) (daemon.ReviewResponse, error) {
	return askReview(func() (string, error) {
		fmt.Fprint(l.out, "review> ")
		line, err := l.in.ReadString('\n')
		if err != nil && line == "" {
			return "", err
		}
		return line, nil
	}, l.out, rv)
}

// askReview reads answers until one fits the review: a line that is not
// an answer, or a scope the review does not offer, is explained and asked
// again here rather than sent to the kernel, which would refuse it and
// leave the review waiting. It fails only when read does.
func askReview(read func() (string, error), errw io.Writer, rv *agent.ReviewEvent) (daemon.ReviewResponse, error) {
	for {
		line, err := read()
		if err != nil {
			return daemon.ReviewResponse{}, err
		}
		resp, perr := parseReviewAnswer(strings.TrimSpace(line))
		if perr == nil && resp.Decision == "approve" && resp.Scope != "once" && !slices.Contains(rv.Scopes, resp.Scope) {
			perr = uerr.New("REVIEW_SCOPE_UNSUPPORTED", fmt.Sprintf("%q is not offered for this review", resp.Scope),
				fmt.Sprintf("this %s review offers: %s", rv.Kind, orDash(strings.Join(rv.Scopes, ", "))), "answer /approve, with a scope it offers, or /reject")
		}
		if perr != nil {
			fmt.Fprint(errw, uerr.From(perr).Render())
			continue
		}
		return resp, nil
	}
}

// parseReviewAnswer reads /approve [FILE…|once|session|always] and
// /reject [reason] (also y/n).
func parseReviewAnswer(line string) (daemon.ReviewResponse, error) {
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch word {
	case "/approve", "y", "yes":
		r := daemon.ReviewResponse{Decision: "approve", Scope: "once"}
		for _, f := range strings.Fields(rest) {
			switch f {
			case "once", "session", "always":
				r.Scope = f
			default:
				r.Files = append(r.Files, f)
			}
		}
		return r, nil
	case "/reject", "n", "no":
		return daemon.ReviewResponse{Decision: "reject", Reason: rest}, nil
	}
	return daemon.ReviewResponse{}, uerr.New("USAGE", "not a review answer: "+line, "a review waits for /approve or /reject", "type /approve, /approve FILE…, or /reject [reason]")
}

// runOneShot implements `fluffy "task"`: exit 0 done, 1 failed, 2 usage,
// 3 stopped by a limit, 4 rejected in review.
func runOneShot(e *env, f taskFlags) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := func(s string) {
		if !f.json {
			fmt.Fprintf(e.stderr, "  %s…\n", s)
		}
	}
	var rec *cassetteFile
	if f.record != "" {
		var err error
		if rec, err = createCassette(f.record); err != nil {
			return report(e, err)
		}
		defer func() {
			if msg := rec.close(); msg != "" {
				fmt.Fprintln(e.stderr, msg)
			}
		}()
	}
	// The provider, model and key are settled here, before the kernel is
	// started or anything is sent: a missing key is named now.
	cfg, err := loadTaskConfig(e, f)
	if err != nil {
		return report(e, err)
	}
	tp, err := resolveProvider(e, cfg, "", "")
	if err != nil {
		if uerr.HasCode(err, kernelapi.CodeNoProvider) && !f.json {
			if dir, derr := existingDir(f.project); derr == nil {
				firstRunGuide(e.stderr, e, dir, true)
			}
		}
		return report(e, err)
	}
	s, err := openSession(ctx, e, f, progress)
	if err != nil {
		return report(e, err)
	}
	if rec != nil {
		rec.header(Version, tp.name, tp.model)
	}
	var st daemon.SessionStatus
	if s.call(ctx, daemon.MethodSessionStatus, daemon.SessionParams{}, &st) == nil {
		printPolicyWarning(e.stderr, st)
	}
	// Stop supervising before the connection closes, or the supervisor
	// takes the closed connection for a dead kernel and restarts it.
	defer func() { cancel(); s.client().Close() }()
	fatal := make(chan error, 1)
	s.supervise(ctx, func(err error) { fatal <- err })
	var render func(agent.Event)
	var r *renderer
	if f.json {
		enc := json.NewEncoder(e.stdout)
		var mu sync.Mutex
		render = func(ev agent.Event) { mu.Lock(); _ = enc.Encode(ev); mu.Unlock() }
	} else {
		r = newRenderer(e.stdout, colorOn(e, s.cfg), stdoutIsTTY(e))
		render = r.Event
		defer r.Close()
	}
	if rec != nil {
		shown := render
		render = func(ev agent.Event) {
			if ev.Type == agent.EventRecorded {
				rec.add(ev.Recorded)
				return
			}
			shown(ev)
		}
	}
	interactive := e.isTTY && !f.json
	var rev reviewer
	if interactive {
		rev = lineReviewer{in: bufio.NewReader(e.stdin), out: e.stdout}
	}
	done, err := s.runTask(ctx, daemon.TaskParams{Prompt: f.prompt, Mode: f.mode, Provider: tp.name, Model: tp.model, ProviderConfig: tp.config, Yes: f.yes, Interactive: interactive, Record: rec != nil, MaxCostUSD: f.maxCost}, render, rev)
	select {
	case ferr := <-fatal:
		return report(e, ferr)
	default:
	}
	if err != nil {
		return report(e, err)
	}
	return agent.ExitCode(done.Status)
}

// colorOn: NO_COLOR always wins, then the color setting, then whether
// stdout is a terminal.
func colorOn(e *env, cfg *config.Config) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set || e.getenv("NO_COLOR") != "" {
		return false
	}
	switch cfg.String("color") {
	case "always":
		return true
	case "never":
		return false
	}
	return stdoutIsTTY(e)
}

func stdoutIsTTY(e *env) bool {
	f, ok := e.stdout.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func historyFile(e *env) string { return filepath.Join(e.home, "history") }
