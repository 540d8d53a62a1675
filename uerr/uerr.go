package uerr

import (
	"errors"
	"fmt"
	"strings"
)

// Level is the severity shown to the user.
type Level string

const (
	LevelError Level = "error"
	LevelWarn  Level = "warn"
	LevelInfo  Level = "info"
)

// Error is a structured, user-facing error. Code is a stable, machine-readable
// identifier (for example "MANIFEST_UNKNOWN_FIELD") that callers and tests
// branch on; What/Why/Fix are for people.
type Error struct {
	Level   Level  `json:"level"`
	Code    string `json:"code"`
	What    string `json:"what"`
	Why     string `json:"why"`
	Fix     string `json:"fix"`
	Context string `json:"context,omitempty"`
	// Err is the underlying cause, if any. It is not serialised.
	Err error `json:"-"`
}

// New returns an error-level Error.
func New(code, what, why, fix string) *Error {
	return &Error{Level: LevelError, Code: code, What: what, Why: why, Fix: fix}
}

// Wrap is New with an underlying cause kept for errors.Is/As.
func Wrap(err error, code, what, why, fix string) *Error {
	e := New(code, what, why, fix)
	e.Err = err
	return e
}

// WithContext returns e with Context set; it modifies and returns e.
func (e *Error) WithContext(format string, args ...any) *Error {
	e.Context = fmt.Sprintf(format, args...)
	return e
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Code != "" {
		b.WriteString(e.Code)
		b.WriteString(": ")
	}
	b.WriteString(e.What)
	if e.Why != "" {
		b.WriteString(": ")
		b.WriteString(e.Why)
	}
	if e.Fix != "" {
		b.WriteString(" (fix: ")
		b.WriteString(e.Fix)
		b.WriteString(")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Render formats e the way the CLI prints it:
//
//	ERROR: Cannot modify source code
//	Reason: ...
//	Fix: ...
func (e *Error) Render() string {
	var b strings.Builder
	lvl := e.Level
	if lvl == "" {
		lvl = LevelError
	}
	fmt.Fprintf(&b, "%s: %s\n", strings.ToUpper(string(lvl)), e.What)
	if e.Why != "" {
		fmt.Fprintf(&b, "Reason: %s\n", e.Why)
	}
	if e.Fix != "" {
		fmt.Fprintf(&b, "Fix: %s\n", e.Fix)
	}
	if e.Context != "" {
		fmt.Fprintf(&b, "Context: %s\n", e.Context)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, "Code: %s\n", e.Code)
	}
	return b.String()
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// HasCode reports whether err's chain holds an *Error with the given code.
func HasCode(err error, code string) bool {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return false
		}
		if e.Code == code {
			return true
		}
		err = e.Err
	}
	return false
}

// From turns any error into a renderable *Error: itself if it is one,
// otherwise a generic wrapper that keeps the original text.
func From(err error) *Error {
	if e, ok := As(err); ok {
		return e
	}
	return Wrap(err, "INTERNAL", err.Error(), "", "re-run with FLUFFY_LOG_LEVEL=debug and report the log if this persists")
}
