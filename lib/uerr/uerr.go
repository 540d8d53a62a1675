package uerr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
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
	// Plugin is set when a plugin wrote this error (UnknownPlugin when the
	// converter did not know which): Code is then in that plugin's
	// namespace (HasCode never matches it, HasPluginCode does) and the
	// text is shown as the plugin's, never as fluffy's own advice.
	Plugin string `json:"plugin,omitempty"`
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

// UnknownPlugin is Error.Plugin when the text came from a plugin whose
// name the converter did not know (the supervisor fills the name in).
const UnknownPlugin = "?"

// Bounds on the fields of a plugin's error (FromPlugin).
const (
	MaxCode  = 64
	MaxWhat  = 512
	MaxWhy   = 4096
	MaxFix   = 512
	maxOther = 4096
)

// FromPlugin builds the error a plugin reported: the code is reduced to
// [A-Z0-9_.-] and kept in the plugin's namespace, and every field is
// escaped (textsafe.Line) and bounded, so a plugin can neither pass for
// fluffy nor paint the terminal. plugin may be UnknownPlugin.
func FromPlugin(plugin, code, what, why, fix string) *Error {
	if plugin == "" {
		plugin = UnknownPlugin
	}
	return &Error{Level: LevelError, Plugin: textsafe.Line(plugin, MaxCode), Code: pluginCode(code),
		What: textsafe.Line(what, MaxWhat), Why: textsafe.Line(why, MaxWhy), Fix: textsafe.Line(fix, MaxFix)}
}

func pluginCode(code string) string {
	var b strings.Builder
	for _, r := range code {
		if b.Len() >= MaxCode {
			break
		}
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "PLUGIN_ERROR"
	}
	return b.String()
}

// FullCode is the code as shown: fluffy's own codes bare, a plugin's as
// PLUGIN:<name>:<code>.
func (e *Error) FullCode() string {
	if e.Plugin == "" {
		return e.Code
	}
	return "PLUGIN:" + e.Plugin + ":" + e.Code
}

// who names the author of a plugin error for display.
func (e *Error) who() string {
	if e.Plugin == UnknownPlugin {
		return "a plugin"
	}
	return "plugin " + e.Plugin
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Plugin != "" {
		b.WriteString(e.who())
		b.WriteString(" says: ")
	}
	if e.Code != "" {
		b.WriteString(e.FullCode())
		b.WriteString(": ")
	}
	b.WriteString(textsafe.Line(e.What, 0))
	if e.Why != "" {
		b.WriteString(": ")
		b.WriteString(textsafe.Line(e.Why, 0))
	}
	if e.Fix != "" {
		b.WriteString(" (fix: ")
		b.WriteString(textsafe.Line(e.Fix, 0))
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
	// Every field is escaped: errors carry paths, plugin and model text.
	if e.Plugin != "" {
		fmt.Fprintf(&b, "%s: %s says: %s\n", strings.ToUpper(string(lvl)), e.who(), textsafe.Line(e.What, 0))
	} else {
		fmt.Fprintf(&b, "%s: %s\n", strings.ToUpper(string(lvl)), textsafe.Line(e.What, 0))
	}
	if e.Why != "" {
		fmt.Fprintf(&b, "Reason: %s\n", textsafe.Line(e.Why, 0))
	}
	if e.Fix != "" {
		if e.Plugin != "" {
			fmt.Fprintf(&b, "Fix suggested by %s (not by fluffy): %s\n", e.who(), textsafe.Line(e.Fix, 0))
		} else {
			fmt.Fprintf(&b, "Fix: %s\n", textsafe.Line(e.Fix, 0))
		}
	}
	if e.Context != "" {
		fmt.Fprintf(&b, "Context: %s\n", textsafe.Line(e.Context, 0))
	}
	if e.Code != "" {
		fmt.Fprintf(&b, "Code: %s\n", textsafe.Line(e.FullCode(), 0))
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

// HasCode reports whether err's chain holds one of fluffy's own errors
// with the given code. A plugin's error never matches, whatever its code:
// plugin codes live in the plugin's namespace (HasPluginCode).
func HasCode(err error, code string) bool { return hasCode(err, code, false) }

// HasPluginCode reports whether err's chain holds an error a plugin
// reported with the given code (codes of a plugin protocol, such as a
// provider's PROVIDER_CONTEXT_LENGTH).
func HasPluginCode(err error, code string) bool { return hasCode(err, code, true) }

func hasCode(err error, code string, plugin bool) bool {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return false
		}
		if e.Code == code && (e.Plugin != "") == plugin {
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
