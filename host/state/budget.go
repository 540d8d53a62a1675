package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Budget error codes.
const (
	CodeBudgetFile   = "STATE_BUDGET_FILE"
	CodeBudgetLocked = "STATE_BUDGET_LOCKED"
)

// Baseline is the content of .fluffy/coverage-baseline.json: the project's
// coverage after the last strict commit, and the explore lock.
type Baseline struct {
	// Percent is total coverage, 0..100.
	Percent   float64   `json:"percent"`
	UpdatedAt time.Time `json:"updated_at"`
	// Session and ViewHash say which commit set it.
	Session  string `json:"session,omitempty"`
	ViewHash string `json:"view_hash,omitempty"`
	// Lock is set while explore mode is locked.
	Lock *Lock `json:"lock,omitempty"`
}

// Lock records why explore mode is locked.
type Lock struct {
	At time.Time `json:"at"`
	// Baseline is the coverage a strict commit must reach to unlock.
	Baseline float64 `json:"baseline"`
	// Coverage is the explore change's coverage that was refused.
	Coverage float64 `json:"coverage"`
	Session  string  `json:"session,omitempty"`
}

// Verdict is the budget's answer for an explore commit.
type Verdict uint8

// Verdicts.
const (
	BudgetAllow Verdict = iota
	BudgetWarn
	BudgetLock
	// BudgetUnmeasured: a baseline exists but the change's coverage was not
	// measured; the commit is refused (without locking explore mode).
	BudgetUnmeasured
)

func (v Verdict) String() string { return [...]string{"allow", "warn", "lock", "unmeasured"}[v] }

// Refused reports whether the verdict refuses the commit.
func (v Verdict) Refused() bool { return v == BudgetLock || v == BudgetUnmeasured }

// Check is the outcome of checking an explore commit against the budget.
type Check struct {
	Verdict Verdict
	// Baseline and Coverage in percent; Drop in percentage points (> 0 is
	// a drop). HasBaseline is false when no strict commit measured one yet.
	Baseline, Coverage, Drop float64
	HasBaseline              bool
	Message                  string
}

// Budget is the project's tech-debt budget: one baseline file, shared by
// every session of the project. Safe for concurrent use.
type Budget struct {
	path string
	cfg  DebtConfig
	now  func() time.Time
	mu   sync.Mutex
}

// NewBudget returns the budget kept in <project>/.fluffy/coverage-baseline.json.
func NewBudget(project string, cfg DebtConfig, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	return &Budget{path: filepath.Join(project, filepath.FromSlash(BaselineFile)), cfg: cfg, now: now}
}

// Path is the baseline file.
func (b *Budget) Path() string { return b.path }

// Load reads the baseline; ok is false when there is none yet.
func (b *Budget) Load() (Baseline, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.load()
}

func (b *Budget) load() (Baseline, bool, error) {
	var bl Baseline
	data, err := os.ReadFile(b.path)
	if errors.Is(err, fs.ErrNotExist) {
		return bl, false, nil
	}
	if err != nil {
		return bl, false, uerr.Wrap(err, CodeBudgetFile, "cannot read the coverage baseline "+b.path, err.Error(), "check the permissions of the project's .fluffy directory")
	}
	if err := json.Unmarshal(data, &bl); err != nil || bl.Percent < 0 || bl.Percent > 100 || math.IsNaN(bl.Percent) {
		why := "percent must be between 0 and 100"
		if err != nil {
			why = err.Error()
		}
		return bl, false, uerr.New(CodeBudgetFile, "the coverage baseline "+b.path+" is not valid", why,
			"restore it from version control, or delete it: the next strict commit measures a new baseline")
	}
	return bl, true, nil
}

// save writes the baseline atomically: temp file, fsync, rename, fsync dir.
func (b *Budget) save(bl Baseline) error {
	data, err := json.MarshalIndent(bl, "", "  ")
	if err != nil {
		return fmt.Errorf("encode coverage baseline: %w", err)
	}
	data = append(data, '\n')
	dir := filepath.Dir(b.path)
	fail := func(err error) error {
		return uerr.Wrap(err, CodeBudgetFile, "cannot write the coverage baseline "+b.path, err.Error(), "check free disk space and the permissions of .fluffy")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	if err := atomicfile.Write(b.path, data, 0o644); err != nil {
		return fail(err)
	}
	return nil
}

// Locked reports whether explore mode is locked.
func (b *Budget) Locked() (*Lock, error) {
	bl, ok, err := b.Load()
	if err != nil || !ok {
		return nil, err
	}
	return bl.Lock, nil
}

// judge classifies an explore commit's coverage against the baseline
// without changing anything.
func (b *Budget) judge(bl Baseline, ok bool, coverage *float64) Check {
	c := Check{HasBaseline: ok, Baseline: bl.Percent}
	if !ok {
		if coverage != nil {
			c.Coverage = *coverage
		}
		c.Message = "no coverage baseline yet: nothing to compare with"
		return c
	}
	if coverage == nil {
		c.Verdict = BudgetUnmeasured
		c.Message = fmt.Sprintf("coverage was not measured, so the drop from the %.1f%% baseline cannot be bounded; run test.run with coverage", bl.Percent)
		return c
	}
	c.Coverage = *coverage
	c.Drop = bl.Percent - *coverage
	switch {
	case c.Drop > b.cfg.Lockout:
		c.Verdict = BudgetLock
		c.Message = fmt.Sprintf("coverage %.1f%% is %.1f points below the %.1f%% baseline (more than %g): explore mode is locked until a strict commit restores coverage", *coverage, c.Drop, bl.Percent, b.cfg.Lockout)
	case c.Drop > b.cfg.Warn:
		c.Verdict = BudgetWarn
		c.Message = fmt.Sprintf("coverage %.1f%% is %.1f points below the %.1f%% baseline (more than %g)", *coverage, c.Drop, bl.Percent, b.cfg.Warn)
	case c.Drop > 0:
		c.Message = fmt.Sprintf("coverage %.1f%% is %.1f points below the %.1f%% baseline, within the budget", *coverage, c.Drop, bl.Percent)
	default:
		c.Message = fmt.Sprintf("coverage %.1f%% does not drop below the %.1f%% baseline", *coverage, bl.Percent)
	}
	return c
}

// CheckExplore judges an explore commit (checked at exploring ->
// committing). A lock verdict locks explore mode and is persisted before
// it returns; a project without a baseline takes the commit's coverage as
// its first baseline.
func (b *Budget) CheckExplore(coverage *float64, session, view string) (Check, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bl, ok, err := b.load()
	if err != nil {
		return Check{Verdict: BudgetUnmeasured, Message: err.Error()}, err
	}
	c := b.judge(bl, ok, coverage)
	switch {
	case c.Verdict == BudgetLock:
		if bl.Lock == nil {
			bl.Lock = &Lock{At: b.now().UTC(), Baseline: bl.Percent, Coverage: *coverage, Session: session}
			if err := b.save(bl); err != nil {
				return c, err
			}
		}
	case !ok && coverage != nil:
		if err := b.save(Baseline{Percent: *coverage, UpdatedAt: b.now().UTC(), Session: session, ViewHash: view}); err != nil {
			return c, err
		}
	}
	return c, nil
}

// StrictCommit updates the baseline after a strict commit (the
// baseline moves with every strict-mode commit) and
// lifts the lock when the coverage reaches the baseline the lock was taken
// against. Without a coverage measurement nothing changes.
func (b *Budget) StrictCommit(coverage *float64, session, view string) (unlocked bool, still *Lock, err error) {
	if coverage == nil {
		l, err := b.Locked()
		return false, l, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bl, _, err := b.load()
	if err != nil && !uerr.HasCode(err, CodeBudgetFile) {
		return false, nil, err
	}
	lock := bl.Lock
	if lock != nil && *coverage >= lock.Baseline {
		lock, unlocked = nil, true
	}
	nb := Baseline{Percent: *coverage, UpdatedAt: b.now().UTC(), Session: session, ViewHash: view, Lock: lock}
	if err := b.save(nb); err != nil {
		return false, bl.Lock, err
	}
	return unlocked, lock, nil
}
