package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TrialSize is how many recent decisions a policy.update replays.
const TrialSize = 100

// BreakingConfirmThreshold: more breaking changes than this need the typed
// confirmation phrase.
const BreakingConfirmThreshold = 5

// RecordedDecision is one past decision, as the audit log keeps it.
type RecordedDecision struct {
	Request  Request
	Decision Action // Allow, Deny or RequireReview as enforced then
	Rule     string
	At       time.Time
}

// DecisionSource gives the most recent decisions, newest last. host/audit
// implements it over the audit log; MemoryDecisions is the in-memory one.
type DecisionSource interface {
	RecentDecisions(n int) ([]RecordedDecision, error)
}

// MemoryDecisions is a bounded in-memory DecisionSource (tests, and the CLI
// when there is no audit log yet). Safe for concurrent use.
type MemoryDecisions struct {
	mu   sync.Mutex
	max  int
	recs []RecordedDecision
}

// NewMemoryDecisions keeps at most max decisions (max <= 0: TrialSize).
func NewMemoryDecisions(max int) *MemoryDecisions {
	if max <= 0 {
		max = TrialSize
	}
	return &MemoryDecisions{max: max}
}

// Record appends a decision, dropping the oldest beyond the bound.
func (m *MemoryDecisions) Record(d RecordedDecision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, d)
	if len(m.recs) > m.max {
		m.recs = append(m.recs[:0:0], m.recs[len(m.recs)-m.max:]...)
	}
}

// RecentDecisions returns up to n decisions, newest last.
func (m *MemoryDecisions) RecentDecisions(n int) ([]RecordedDecision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > len(m.recs) || n < 0 {
		n = len(m.recs)
	}
	return append([]RecordedDecision(nil), m.recs[len(m.recs)-n:]...), nil
}

// Change is one replayed decision whose outcome the new policy changes.
type Change struct {
	Request  Request
	Old, New Action
	NewRule  string
	Reasons  []string
	Breaking bool // allow -> deny
}

func (c Change) String() string {
	tag := ""
	if c.Breaking {
		tag = "[BREAKING] "
	}
	return fmt.Sprintf("%s%s: %s -> %s (%s)", tag, c.Request.String(), c.Old, c.New, c.NewRule)
}

// Proposal is a validated new policy and its trial run.
type Proposal struct {
	Policy   *Policy
	Replayed int
	Changes  []Change
	Breaking int
}

// ConfirmPhrase is the phrase the user must type to apply a proposal with
// more than BreakingConfirmThreshold breaking changes ("" = none needed).
func (p *Proposal) ConfirmPhrase() string {
	if p.Breaking <= BreakingConfirmThreshold {
		return ""
	}
	return fmt.Sprintf("apply %d breaking changes", p.Breaking)
}

// Prepare validates content in memory as the new policy and replays the
// last TrialSize recorded decisions against it (built-in and YAML layers;
// tokens and extensions do not change with the policy file), keeping only
// the decisions that change.
func Prepare(name string, content []byte, src DecisionSource) (*Proposal, error) {
	p, err := Load(name, content)
	if err != nil {
		return nil, err
	}
	prop := &Proposal{Policy: p}
	if src == nil {
		return prop, nil
	}
	recs, err := src.RecentDecisions(TrialSize)
	if err != nil {
		return nil, uerr.Wrap(err, "POLICY_TRIAL_SOURCE", "cannot read recent decisions for the trial run", err.Error(),
			"check the audit log with `fluffy audit verify`")
	}
	trial := NewEngine(p, Options{})
	for _, rec := range recs {
		req := rec.Request
		req.Token = nil
		var res Result
		if rec.At.IsZero() {
			res = trial.evaluate(context.Background(), p, &req, evalOpts{})
		} else {
			trial.clock = fixedClock(rec.At)
			res = trial.evaluate(context.Background(), p, &req, evalOpts{})
		}
		prop.Replayed++
		if res.Decision == rec.Decision {
			continue
		}
		c := Change{Request: rec.Request, Old: rec.Decision, New: res.Decision, NewRule: res.DecidingRule(), Reasons: res.Reasons,
			Breaking: rec.Decision == Allow && res.Decision == Deny}
		if c.Breaking {
			prop.Breaking++
		}
		prop.Changes = append(prop.Changes, c)
	}
	return prop, nil
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// Commit writes the proposal to path atomically (temp file in the same
// directory, fsync, rename) after checking the confirmation phrase, and
// swaps it into engine when engine is not nil. The caller must have
// obtained human review (the built-in policy.update rule requires it).
func Commit(path string, prop *Proposal, phrase string, engine *Engine) error {
	if want := prop.ConfirmPhrase(); want != "" && phrase != want {
		return uerr.New("POLICY_CONFIRM_PHRASE", "policy update not applied",
			fmt.Sprintf("it makes %d previously allowed operations denied (more than %d)", prop.Breaking, BreakingConfirmThreshold),
			fmt.Sprintf("type the confirmation phrase exactly: %q", want))
	}
	if err := WriteAtomic(path, prop.Policy.Content); err != nil {
		return err
	}
	if engine != nil {
		np := *prop.Policy
		np.File = path
		engine.Swap(&np)
	}
	return nil
}

// WriteAtomic writes data to path through a temp file and a rename, so a
// crash leaves either the old or the new file, never a mix.
func WriteAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return writeFailed(path, err)
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return writeFailed(path, err)
	}
	return nil
}

func writeFailed(path string, err error) error {
	return uerr.Wrap(err, "POLICY_WRITE", "cannot write policy file "+path, err.Error(), "check that the directory exists and is writable")
}
