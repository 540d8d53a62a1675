package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// ANSI styles used by the renderer; empty when colour is off.
type styles struct{ dim, bold, red, green, yellow, cyan, reset string }

func newStyles(color bool) styles {
	if !color {
		return styles{}
	}
	return styles{dim: "\x1b[2m", bold: "\x1b[1m", red: "\x1b[31m", green: "\x1b[32m", yellow: "\x1b[33m", cyan: "\x1b[36m", reset: "\x1b[0m"}
}

// renderer draws a task's event stream for a person: streamed text as it arrives, one line per tool call
// with its target and end-to-end duration, state changes, review diffs, and
// a spinner while a sandbox works. Model and plugin text is escaped.
type renderer struct {
	mu      sync.Mutex
	w       io.Writer
	s       styles
	tty     bool
	midLine bool // streamed text left the cursor mid-line
	inText  bool // inside a block of model text
	running map[string]agent.ToolEvent
	spin    *spinner
	last    *agent.BudgetEvent
}

func newRenderer(w io.Writer, color, tty bool) *renderer {
	return &renderer{w: w, s: newStyles(color), tty: tty, running: map[string]agent.ToolEvent{}}
}

// Event renders one event.
func (r *renderer) Event(ev agent.Event) {
	if ev.Type == agent.EventRecorded {
		return // cassette lines go to the --record file, not the screen
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Type != agent.EventTextDelta && ev.Type != agent.EventReasoningDelta {
		r.stopSpinLocked()
	}
	switch ev.Type {
	case agent.EventTextDelta:
		r.stopSpinLocked()
		if !r.inText {
			r.newlineLocked()
			fmt.Fprintf(r.w, "%sAI:%s ", r.s.bold, r.s.reset)
			r.inText = true
		}
		t := safeText(ev.Text)
		fmt.Fprint(r.w, t)
		r.midLine = !strings.HasSuffix(t, "\n")
	case agent.EventReasoningDelta:
		// Reasoning is kept apart from the answer: shown dim, never mixed in.
		if r.inText {
			r.newlineLocked()
			r.inText = false
		}
		t := safeText(ev.Text)
		fmt.Fprintf(r.w, "%s%s%s", r.s.dim, t, r.s.reset)
		r.midLine = !strings.HasSuffix(t, "\n")
	case agent.EventToolExecuting:
		r.endTextLocked()
		if ev.Tool != nil {
			r.running[ev.Tool.CallID] = *ev.Tool
			if r.tty {
				r.spin = startSpinner(r.w, &r.mu, fmt.Sprintf("%s %s", ev.Tool.Name, safeLine(ev.Tool.Target, 60)), r.s)
			}
		}
	case agent.EventToolResult:
		r.endTextLocked()
		if t := ev.Tool; t != nil {
			delete(r.running, t.CallID)
			mark, color := "✓", r.s.green
			if !t.OK {
				mark, color = "✗", r.s.red
			}
			target := ""
			if t.Target != "" {
				target = " " + safeLine(t.Target, 80)
			}
			fmt.Fprintf(r.w, "  %s%s%s %s%s %s(%s)%s\n", color, mark, r.s.reset, t.Name, target, r.s.dim, fmtDuration(t.DurationMS), r.s.reset)
			if t.Summary != "" {
				fmt.Fprintf(r.w, "    %s\n", safeLine(t.Summary, 200))
			}
			if t.Error != nil {
				fmt.Fprintf(r.w, "    %s%s%s\n", r.s.red, safeLine(says(t.Error)+t.Error.What, 200), r.s.reset)
			}
		}
	case agent.EventStateChanged:
		r.endTextLocked()
		if st := ev.State; st != nil {
			fmt.Fprintf(r.w, "  %s[%s] %s → %s%s", r.s.cyan, st.Mode, orDash(st.From), st.To, r.s.reset)
			if st.Reason != "" {
				fmt.Fprintf(r.w, " %s%s%s", r.s.dim, safeLine(st.Reason, 120), r.s.reset)
			}
			fmt.Fprintln(r.w)
		}
	case agent.EventReviewRequested:
		r.endTextLocked()
		r.reviewLocked(ev.Review)
	case agent.EventReviewResolved:
		r.endTextLocked()
		if rv := ev.Review; rv != nil {
			fmt.Fprintf(r.w, "  review %s: %s", rv.Kind, rv.Decision)
			if rv.Reason != "" {
				fmt.Fprintf(r.w, " (%s)", safeLine(rv.Reason, 120))
			}
			fmt.Fprintln(r.w)
		}
	case agent.EventBudget:
		r.last = ev.Budget
	case agent.EventNotice:
		r.endTextLocked()
		fmt.Fprintf(r.w, "  %s%s%s\n", r.s.dim, safeLine(ev.Text, 200), r.s.reset)
	case agent.EventError:
		r.endTextLocked()
		if ev.Error != nil {
			fmt.Fprintf(r.w, "  %s! %s%s", r.s.yellow, safeLine(says(ev.Error)+ev.Error.What, 200), r.s.reset)
			if ev.Error.Why != "" {
				fmt.Fprintf(r.w, ": %s", safeLine(ev.Error.Why, 200))
			}
			fmt.Fprintln(r.w)
		}
	case agent.EventDone:
		r.endTextLocked()
		r.doneLocked(ev.Done)
	}
}

func (r *renderer) reviewLocked(rv *agent.ReviewEvent) {
	if rv == nil {
		return
	}
	fmt.Fprintf(r.w, "\n%sReview (%s): %s%s\n", r.s.bold, rv.Kind, safeLine(rv.Summary, 200), r.s.reset)
	for _, f := range rv.Files {
		tag := ""
		switch {
		case f.Conflict:
			tag = r.s.red + " CONFLICT: changed in the project meanwhile" + r.s.reset
		case f.Created:
			tag = " (new)"
		case f.Deleted:
			tag = " (deleted)"
		}
		fmt.Fprintf(r.w, "%s%s%s +%d -%d%s\n", r.s.bold, safeLine(f.Path, 200), r.s.reset, f.Added, f.Removed, tag)
		for _, line := range strings.Split(strings.TrimRight(f.Diff, "\n"), "\n") {
			if line == "" {
				continue
			}
			c := ""
			switch {
			case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
				c = r.s.bold
			case strings.HasPrefix(line, "+"):
				c = r.s.green
			case strings.HasPrefix(line, "-"):
				c = r.s.red
			case strings.HasPrefix(line, "@@"):
				c = r.s.cyan
			}
			fmt.Fprintf(r.w, "%s%s%s\n", c, safeLine(line, 400), r.s.reset)
		}
	}
	if pc := rv.Policy; pc != nil {
		r.policyChangeLocked(rv.Kind, pc)
	}
	switch rv.Kind {
	case "merge":
		fmt.Fprintln(r.w, "  /approve to merge all, /approve FILE… for some, /reject [reason] to send it back")
	case "policy.update":
		fmt.Fprintf(r.w, "  /approve to write it to %s, /reject to keep the policy as it is (the call runs this once either way)\n", safeLine(rv.Policy.File, 200))
	default:
		fmt.Fprintf(r.w, "  /approve [%s] or /reject [reason]\n", strings.Join(rv.Scopes, "|"))
	}
}

// policyChangeLocked shows the canonical rules a policy change adds: on a
// tool review, what "/approve always" would propose; on a policy.update
// review, the lines written into the file and the trial run.
func (r *renderer) policyChangeLocked(kind string, pc *agent.PolicyChange) {
	if kind == "policy.update" {
		fmt.Fprintf(r.w, "  Proposed change to %s:\n", safeLine(pc.File, 200))
		for _, line := range strings.Split(strings.TrimRight(pc.Diff, "\n"), "\n") {
			c := r.s.green
			if strings.HasPrefix(line, "@@") {
				c = r.s.cyan
			}
			fmt.Fprintf(r.w, "  %s%s%s\n", c, safeLine(line, 400), r.s.reset)
		}
		if t := pc.Trial; t != nil {
			fmt.Fprintf(r.w, "  Trial: replayed %d recent decisions: %d change, %d breaking\n", t.Replayed, len(t.Changes), t.Breaking)
			for _, c := range t.Changes {
				fmt.Fprintf(r.w, "    %s\n", safeLine(c, 300))
			}
		}
		return
	}
	fmt.Fprintf(r.w, "  %s/approve always proposes this change to %s (you review it next):%s\n", r.s.dim, safeLine(pc.File, 200), r.s.reset)
	for _, line := range strings.Split(strings.TrimRight(pc.Rules, "\n"), "\n") {
		fmt.Fprintf(r.w, "  %s%s%s\n", r.s.dim, safeLine(line, 400), r.s.reset)
	}
}

func (r *renderer) doneLocked(d *agent.DoneEvent) {
	if d == nil {
		return
	}
	color := r.s.green
	word := "Done."
	switch d.Status {
	case agent.StatusAnswered:
		word = "Answered:"
	case agent.StatusStopped:
		color, word = r.s.yellow, "Stopped:"
	case agent.StatusRejected:
		color, word = r.s.yellow, "Rejected:"
	case agent.StatusFailed:
		color, word = r.s.red, "Failed:"
	case agent.StatusCancelled:
		color, word = r.s.yellow, "Cancelled."
	}
	fmt.Fprintf(r.w, "\n%s%s%s", color, word, r.s.reset)
	for _, s := range []string{d.Reason, d.Summary} {
		if s != "" {
			fmt.Fprintf(r.w, " %s", safeLine(s, 400))
		}
	}
	fmt.Fprintln(r.w)
	for _, f := range d.Files {
		fmt.Fprintf(r.w, "  %s\n", safeLine(f, 200))
	}
	if d.Commit != "" {
		fmt.Fprintf(r.w, "  committed %s\n", safeLine(d.Commit, 64))
	}
	if d.Tokens > 0 {
		fmt.Fprintf(r.w, "  %s%d tokens, %s%s\n", r.s.dim, d.Tokens, costText(d.CostUSD, r.last), r.s.reset)
	}
}

// costText is a task's cost as the user reads it: dollars when the
// model's prices are known, else why there is no figure.
func costText(usd float64, b *agent.BudgetEvent) string {
	if b == nil || !b.CostKnown {
		return "cost unknown (the model's prices are not in fluffy's table: set model_profile.price_in and price_out)"
	}
	return fmt.Sprintf("$%.4f", usd)
}

func (r *renderer) newlineLocked() {
	if r.midLine {
		fmt.Fprintln(r.w)
		r.midLine = false
	}
}

func (r *renderer) endTextLocked() {
	r.newlineLocked()
	r.inText = false
}

func (r *renderer) stopSpinLocked() {
	if r.spin != nil {
		r.spin.stop()
		r.spin = nil
	}
}

// Close stops the spinner.
func (r *renderer) Close() {
	r.mu.Lock()
	r.stopSpinLocked()
	r.newlineLocked()
	r.mu.Unlock()
}

// says marks a plugin's error text as the plugin's.
func says(e *uerr.Error) string {
	switch e.Plugin {
	case "":
		return ""
	case uerr.UnknownPlugin:
		return "a plugin says: "
	}
	return "plugin " + e.Plugin + " says: "
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtDuration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// safeText and safeLine are textsafe's escaping (the one function for
// untrusted text): safeText keeps newlines and tabs, safeLine makes one
// line bounded to max bytes.
func safeText(s string) string { return textsafe.Text(s, textsafe.MaxText) }

func safeLine(s string, max int) string { return textsafe.Line(s, max) }

// spinner animates one status line while a sandbox works. It shares the
// renderer's lock so it never interleaves with other output.
type spinner struct {
	w    io.Writer
	done chan struct{}
	drew bool // guarded by the renderer's lock
}

func startSpinner(w io.Writer, mu *sync.Mutex, label string, s styles) *spinner {
	sp := &spinner{w: w, done: make(chan struct{})}
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	start := time.Now()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-sp.done:
				return
			case <-t.C:
			}
			mu.Lock()
			select {
			case <-sp.done:
				mu.Unlock()
				return
			default:
			}
			fmt.Fprintf(w, "\r  %s%s %s %.1fs%s\x1b[K", s.dim, frames[i%len(frames)], label, time.Since(start).Seconds(), s.reset)
			sp.drew = true
			mu.Unlock()
		}
	}()
	return sp
}

// stop must be called with the renderer's lock held; it clears the line
// the spinner drew (the goroutine checks done under the same lock, so it
// never draws again).
func (sp *spinner) stop() {
	close(sp.done)
	if sp.drew {
		fmt.Fprint(sp.w, "\r\x1b[K")
	}
}
