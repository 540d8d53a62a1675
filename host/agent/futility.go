package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
)

// Futility thresholds: runaway loops of
// identical failing calls are the costliest failure of agents in use.
const (
	repeatWarn      = 2  // the same call and result: tell the model
	repeatStop      = 3  // ...and stop
	sameFailureStop = 3  // the same failing test run three times
	noProgressStop  = 12 // turns without a state change or a new file change
)

// futility watches a task for loops that make no progress.
type futility struct {
	calls       map[string]int
	tried       []string // distinct calls, in order, for the explanation
	lastFailure string
	failures    int
	idleTurns   int
}

func newFutility() *futility { return &futility{calls: map[string]int{}} }

func canonical(args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}

func callKey(name string, args json.RawMessage, res ToolResult) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", name, canonical(args), res.Output)
	if res.Err != nil {
		fmt.Fprintf(h, "%s\x00%s", res.Err.Code, res.Err.What)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// observe records a call; it returns a note for the model when the call
// repeats, and a stop reason when it repeated too often.
func (f *futility) observe(name string, args json.RawMessage, res ToolResult) (note, stop string) {
	k := callKey(name, args, res)
	f.calls[k]++
	if f.calls[k] == 1 {
		f.tried = append(f.tried, name+" "+textsafe.Cap(canonical(args), 120))
	}
	switch n := f.calls[k]; {
	case n >= repeatStop:
		stop = fmt.Sprintf("the model made the same %s call %d times and got the same result each time", name, n)
	case n >= repeatWarn:
		note = "Note from the kernel: this exact call already returned this exact result. Do something different; repeating it will stop the task."
	}
	if res.TestStatus != "" {
		if res.TestStatus == "green" {
			f.lastFailure, f.failures = "", 0
		} else {
			fails := append([]string(nil), res.Failures...)
			sort.Strings(fails)
			sig := res.TestStatus + ":" + strings.Join(fails, ",")
			if sig == f.lastFailure {
				f.failures++
			} else {
				f.lastFailure, f.failures = sig, 1
			}
			if f.failures >= sameFailureStop && stop == "" {
				stop = fmt.Sprintf("the same test failure (%s) came back %d times in a row", textsafe.Cap(sig, 200), f.failures)
			}
		}
	}
	return note, stop
}

// turn records whether a turn made progress; it returns a stop reason
// after too many turns without.
func (f *futility) turn(progressed bool) string {
	if progressed {
		f.idleTurns = 0
		return ""
	}
	f.idleTurns++
	if f.idleTurns >= noProgressStop {
		return fmt.Sprintf("%d turns went by without a workflow state change or a new file change", f.idleTurns)
	}
	return ""
}

// explain lists what was tried, for the user.
func (f *futility) explain() string {
	t := f.tried
	if len(t) > 8 {
		t = t[len(t)-8:]
	}
	if len(t) == 0 {
		return ""
	}
	return "tried: " + strings.Join(t, "; ")
}
