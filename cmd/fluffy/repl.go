package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/peterh/liner"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// slashCommands are the REPL's commands, with their help.
var slashHelp = [][2]string{
	{"/status", "mode, workflow state, what is writable now and why"},
	{"/budget", "turns, tokens, cost and time used by the last task; the tech-debt budget"},
	{"/prompt", "the system prompt the model reads next (workflow, project brief and instructions, tools)"},
	{"/pin TEXT", "keep TEXT in the model's context for the whole session"},
	{"/strict", "switch to strict mode (test first)"},
	{"/explore", "switch to explore mode (through the policy)"},
	{"/debug", "switch to debug mode (needs review)"},
	{"/provider [NAME]", "show or switch the provider of the next tasks: openai, anthropic, ollama, replay"},
	{"/model [NAME]", "show or switch the model of the next tasks (/model - goes back to the configured one)"},
	{"/undo", "drop the last proposed change"},
	{"/approve [FILE…|SCOPE]", "approve the pending review: a merge's files (all, or some); a tool call once, session or always (always proposes a policy change, reviewed next)"},
	{"/reject [reason]", "reject the pending review"},
	{"/sessions", "list this project's sessions"},
	{"/help", "this list"},
	{"/exit", "leave (or Ctrl-D at an empty prompt)"},
}

// repl is the interactive shell: `fluffy` with no task.
type repl struct {
	e     *env
	s     *session
	ln    *liner.State
	r     *renderer
	ctx   context.Context
	fatal chan error
	f     taskFlags
	// provider and model, when set, are /provider's and /model's choice;
	// they win over the flags and the config for this shell's tasks.
	provider, model string
}

// current is the provider the next task runs on, read afresh (a `fluffy
// init` or `config set` in another terminal applies to the next task).
func (rp *repl) current() (taskProvider, error) {
	cfg, err := loadTaskConfig(rp.e, rp.f)
	if err != nil {
		return taskProvider{}, err
	}
	return resolveProvider(rp.e, cfg, rp.provider, rp.model)
}

// promptLabel prefixes the prompt with the provider/model tasks run on.
func (rp *repl) promptLabel() string {
	if tp, err := rp.current(); err == nil {
		return safeLine(tp.label(), 60) + " "
	}
	return ""
}

func runREPL(e *env, f taskFlags) int {
	if !e.isTTY {
		return report(e, uerr.New("USAGE", "fluffy needs a terminal for the interactive shell",
			"standard input is not a terminal", `pass a task instead: fluffy --yes --json "add error handling to parseConfig"`))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := openSession(ctx, e, f, func(m string) { fmt.Fprintf(e.stderr, "  %s…\n", m) })
	if err != nil {
		return report(e, err)
	}
	// Stop supervising before the connection closes, or the supervisor
	// takes the closed connection for a dead kernel and restarts it.
	defer func() { cancel(); s.client().Close() }()
	rp := &repl{e: e, s: s, ctx: ctx, f: f, fatal: make(chan error, 1), r: newRenderer(e.stdout, colorOn(e, s.cfg), true)}
	s.supervise(ctx, func(err error) { rp.fatal <- err })
	// Ctrl-C never ends the shell: while a task runs its handler cancels
	// the task, at the prompt the line editor reads it as a key; between
	// the two (a task just ended, the prompt not drawn yet) the default
	// action would kill fluffy and leave its task waiting on a review.
	ignore := make(chan os.Signal, 1)
	signal.Notify(ignore, os.Interrupt)
	defer signal.Stop(ignore)
	rp.ln = liner.NewLiner()
	defer rp.ln.Close()
	rp.ln.SetCtrlCAborts(true)
	rp.ln.SetTabCompletionStyle(liner.TabPrints)
	rp.ln.SetCompleter(rp.complete)
	if hf, err := os.Open(historyFile(e)); err == nil {
		_, _ = rp.ln.ReadHistory(hf)
		hf.Close()
	}
	defer rp.saveHistory()
	var st daemon.SessionStatus
	_ = s.call(ctx, daemon.MethodSessionStatus, daemon.SessionParams{}, &st)
	fmt.Fprintf(e.stdout, "fluffy %s — %s mode — %s   (/help for commands, Ctrl-D to leave)\n", Version, orDash(st.Mode), orDash(st.State))
	if !st.L1 {
		fmt.Fprintf(e.stdout, "  the kernel runs as a local process (--l1=none)\n")
	}
	printPolicyWarning(e.stdout, st)
	rp.printProviderProblem(true)
	aborted := false
	for {
		select {
		case err := <-rp.fatal:
			return report(e, err)
		default:
		}
		_ = s.call(ctx, daemon.MethodSessionStatus, daemon.SessionParams{}, &st)
		line, err := rp.ln.Prompt(fmt.Sprintf("%s[%s] [%s] > ", rp.promptLabel(), orDash(st.Mode), orDash(st.State)))
		if errors.Is(err, liner.ErrPromptAborted) {
			if aborted {
				return 0
			}
			aborted = true
			fmt.Fprintln(e.stdout, "  (Ctrl-C again or Ctrl-D to leave)")
			continue
		}
		if err != nil { // io.EOF: Ctrl-D at an empty prompt
			fmt.Fprintln(e.stdout)
			return 0
		}
		aborted = false
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		rp.ln.AppendHistory(line)
		if strings.HasPrefix(line, "/") {
			if quit := rp.slash(line); quit {
				return 0
			}
			continue
		}
		tp, err := rp.current()
		if err != nil {
			fmt.Fprint(e.stderr, uerr.From(err).Render())
			continue
		}
		done, err := s.runTask(ctx, daemon.TaskParams{Prompt: line, Interactive: true, Provider: tp.name, Model: tp.model, ProviderConfig: tp.config}, rp.r.Event, rp)
		rp.r.Close()
		if err != nil {
			fmt.Fprint(e.stderr, uerr.From(err).Render())
			continue
		}
		_ = done
	}
}

// printProvider says what the next task runs on, or why it cannot run.
func (rp *repl) printProvider() {
	tp, err := rp.current()
	if err != nil {
		rp.printProviderProblem(false)
		return
	}
	fmt.Fprintf(rp.e.stdout, "  provider %s, model %s (provider from %s)\n", tp.name, orDash(tp.model), safeLine(tp.from, 200))
}

// printProviderProblem says why no task can run yet: the first-run lines
// when nothing names a provider (banner), the missing key otherwise.
func (rp *repl) printProviderProblem(banner bool) {
	_, err := rp.current()
	if err == nil {
		return
	}
	if uerr.HasCode(err, kernelapi.CodeNoProvider) && banner {
		for _, l := range bannerLines(rp.s.project) {
			fmt.Fprintf(rp.e.stdout, "  %s\n", l)
		}
		return
	}
	ue := uerr.From(err)
	fmt.Fprintf(rp.e.stdout, "  ! no task can run yet: %s\n", safeLine(ue.What, 300))
	if ue.Fix != "" {
		fmt.Fprintf(rp.e.stdout, "    %s\n", safeLine(ue.Fix, 400))
	}
}

// review implements reviewer: the answer is typed at a review prompt.
func (rp *repl) review(ctx context.Context, rv *agent.ReviewEvent) (daemon.ReviewResponse, error) {
	resp, err := askReview(func() (string, error) { return rp.ln.Prompt("review> ") }, rp.e.stderr, rv)
	if err != nil {
		return daemon.ReviewResponse{Decision: "reject", Reason: "review prompt closed"}, nil
	}
	return resp, nil
}

// slash runs one /command; it reports whether to leave.
func (rp *repl) slash(line string) bool {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	ctx := rp.ctx
	var err error
	switch cmd {
	case "/exit", "/quit":
		return true
	case "/help":
		for _, h := range slashHelp {
			fmt.Fprintf(rp.e.stdout, "  %-24s %s\n", h[0], h[1])
		}
	case "/status":
		var st daemon.SessionStatus
		if err = rp.s.call(ctx, daemon.MethodSessionStatus, daemon.SessionParams{}, &st); err == nil {
			fmt.Fprintf(rp.e.stdout, "  session %s: %s mode, state %s, %d pending change(s)\n", st.Session, st.Mode, st.State, st.Pending)
			fmt.Fprintf(rp.e.stdout, "  writable now: %s\n", orDash(strings.Join(st.Writable, ", ")))
			if st.TestFiles != "" {
				fmt.Fprintf(rp.e.stdout, "  test files: %s\n", safeLine(st.TestFiles, 400))
			}
			if st.Why != "" {
				fmt.Fprintf(rp.e.stdout, "  why: %s\n", safeLine(st.Why, 400))
			}
			where := "an L1 container"
			if !st.L1 {
				where = "a local process (--l1=none)"
			}
			fmt.Fprintf(rp.e.stdout, "  kernel: %s; plugins in %s sandboxes\n", where, st.Sandbox)
			rp.printProvider()
			fmt.Fprintf(rp.e.stdout, "  policy: %s\n", safeLine(orDash(st.Policy), 300))
			printPolicyWarning(rp.e.stdout, st)
		}
	case "/prompt":
		var p daemon.PromptResult
		if err = rp.s.call(ctx, daemon.MethodSessionPrompt, daemon.SessionParams{}, &p); err == nil {
			fmt.Fprintf(rp.e.stdout, "%s\n  (about %d tokens)\n", textsafe.Text(p.System, 256<<10), p.Tokens)
		}
	case "/budget":
		var st daemon.SessionStatus
		if err = rp.s.call(ctx, daemon.MethodSessionBudget, daemon.SessionParams{}, &st); err == nil {
			if b := st.Budget; b != nil {
				fmt.Fprintf(rp.e.stdout, "  turns %d/%d, tokens %d/%d, cost %s (last turn $%.4f, limit $%.2f), time %s\n", b.Turns, b.MaxTurns, b.Tokens, b.MaxTokens, costText(b.CostUSD, b), b.TurnCostUSD, b.MaxCostUSD, fmtDuration(b.ElapsedMS))
			} else {
				fmt.Fprintln(rp.e.stdout, "  no task has run in this session yet")
			}
			if st.Debt != "" {
				fmt.Fprintf(rp.e.stdout, "  tech debt: %s\n", st.Debt)
			}
		}
	case "/provider":
		if arg != "" {
			if !slices.Contains(config.ProviderNames(), arg) {
				err = uerr.New("USAGE", fmt.Sprintf("unknown provider %q", safeLine(arg, 40)), "fluffy ships the providers "+strings.Join(config.ProviderNames(), ", "), "type /provider NAME with one of them")
				break
			}
			// A model belongs to its provider: the new one starts on its own.
			rp.provider, rp.model = arg, ""
		}
		rp.printProvider()
	case "/model":
		switch arg {
		case "":
		case "-":
			rp.model = ""
		default:
			rp.model = arg
		}
		rp.printProvider()
	case "/pin":
		if arg == "" {
			err = uerr.New("USAGE", "/pin needs text", "pinned text stays in the model's context", "type /pin TEXT")
			break
		}
		err = rp.s.call(ctx, daemon.MethodSessionPin, daemon.SessionParams{Text: arg}, nil)
		if err == nil {
			fmt.Fprintln(rp.e.stdout, "  pinned")
		}
	case "/strict", "/explore", "/debug":
		var st daemon.SessionStatus
		if err = rp.s.call(ctx, daemon.MethodSessionMode, daemon.SessionParams{Mode: strings.TrimPrefix(cmd, "/")}, &st); err == nil {
			fmt.Fprintf(rp.e.stdout, "  %s mode\n", st.Mode)
		}
	case "/undo":
		var res struct {
			Path string `json:"path"`
		}
		if err = rp.s.call(ctx, daemon.MethodSessionUndo, daemon.SessionParams{}, &res); err == nil {
			fmt.Fprintf(rp.e.stdout, "  dropped the proposed change to %s\n", safeLine(res.Path, 200))
		}
	case "/sessions":
		var list []daemon.SessionInfo
		if err = rp.s.call(ctx, daemon.MethodSessionList, daemon.SessionParams{}, &list); err == nil {
			for _, si := range list {
				mark := " "
				if si.Current {
					mark = "*"
				}
				title := safeLine(si.Title, 60)
				if si.Archived {
					title = "(archived) " + title
				}
				fmt.Fprintf(rp.e.stdout, "%s %s  %s  %s/%s  %d pending  %s\n", mark, si.ID, si.Updated, si.Mode, si.State, si.Pending, title)
			}
			fmt.Fprintln(rp.e.stdout, "  (* current; switch with `fluffy session resume ID` or `fluffy session new`)")
		}
	case "/approve", "/reject":
		err = uerr.New("NO_REVIEW", "nothing is waiting for review", "reviews are answered while a task waits for them", "run a task; when it asks, answer at the review> prompt")
	default:
		err = uerr.New("USAGE", "unknown command "+cmd, "the REPL knows the commands /help lists", "type /help")
	}
	if err != nil {
		fmt.Fprint(rp.e.stderr, uerr.From(err).Render())
	}
	return false
}

// complete offers slash commands and project paths for the word being
// typed.
func (rp *repl) complete(line string) []string {
	if strings.HasPrefix(line, "/") && !strings.Contains(line, " ") {
		var out []string
		for _, h := range slashHelp {
			c, _, _ := strings.Cut(h[0], " ")
			if strings.HasPrefix(c, line) {
				out = append(out, c)
			}
		}
		return out
	}
	i := strings.LastIndexAny(line, " \t")
	head, word := line[:i+1], line[i+1:]
	dir, base := filepath.Split(word)
	ents, err := os.ReadDir(filepath.Join(rp.s.project, dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, en := range ents {
		n := en.Name()
		if !strings.HasPrefix(n, base) || (strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".")) || n == ".git" || n == ".fluffy" {
			continue
		}
		if en.IsDir() {
			n += "/"
		}
		out = append(out, head+dir+n)
	}
	sort.Strings(out)
	return out
}

func (rp *repl) saveHistory() {
	_ = os.MkdirAll(rp.e.home, 0o700)
	if f, err := os.OpenFile(historyFile(rp.e), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
		_, _ = rp.ln.WriteHistory(f)
		f.Close()
	}
}

// printPolicyWarning says when the project's policy file is not in force
// (its content is not approved) and how to fix it.
func printPolicyWarning(w io.Writer, st daemon.SessionStatus) {
	if st.PolicyWarning != "" {
		fmt.Fprintf(w, "  ! %s\n", safeLine(st.PolicyWarning, 400))
	}
	if st.NoTasks != "" {
		fmt.Fprintf(w, "  ! no task can run yet: %s\n", safeLine(st.NoTasks, 400))
	}
}
