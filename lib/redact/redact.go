// Package redact removes secrets from free text before it is stored or shown:
// API keys by their well-known prefixes (OpenAI sk-, Anthropic sk-ant-,
// GitHub ghp_/gho_/ghu_/ghs_/ghr_/github_pat_, AWS AKIA/ASIA, Slack xox?-),
// bearer tokens, and PEM private-key blocks. host/audit uses it for the
// input/output summaries of every record; host/router reuses it to sanitize
// tool output.
//
// It owns the patterns only; it must not log, store or import other fluffy
// packages.
package redact

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Marker replaces every secret.
const Marker = "[REDACTED]"

type rule struct {
	re   *regexp.Regexp
	repl string
}

// Redactor is safe for concurrent use. Build one with New and share it.
type Redactor struct {
	rules    []rule
	triggers []string
	// pairs is a bitmap of the triggers' first two bytes and byFirst groups
	// the triggers by their first byte, so that one pass over the text
	// finds whether any trigger occurs (instead of one strings.Contains
	// pass per trigger). Every trigger is at least two bytes long.
	pairs   [1 << 16 / 64]uint64
	byFirst [256][]string
}

// New compiles the patterns.
func New() *Redactor {
	r := &Redactor{
		rules: []rule{
			{regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|$)`), "[REDACTED PRIVATE KEY]"},
			{regexp.MustCompile(`sk-ant-[A-Za-z0-9_\-]{6,}`), "sk-ant-" + Marker},
			{regexp.MustCompile(`sk-[A-Za-z0-9_\-]{12,}`), "sk-" + Marker},
			{regexp.MustCompile(`\b(gh[pousr]_)[A-Za-z0-9]{16,}`), "${1}" + Marker},
			{regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{16,}`), "github_pat_" + Marker},
			{regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`), "${1}" + Marker},
			{regexp.MustCompile(`\b(xox[abposr]-)[A-Za-z0-9\-]{8,}`), "${1}" + Marker},
			{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*`), "${1}" + Marker},
		},
		// Cheap substring checks: text holding none of them skips the regexps.
		triggers: []string{"PRIVATE KEY", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "xox", "earer", "EARER"},
	}
	for _, t := range r.triggers {
		pair := uint16(t[0])<<8 | uint16(t[1])
		r.pairs[pair/64] |= 1 << (pair % 64)
		r.byFirst[t[0]] = append(r.byFirst[t[0]], t)
	}
	return r
}

// mayHoldSecret reports whether s contains one of the triggers: exactly
// the same answer as a strings.Contains per trigger, in a single pass
// (a trigger occurs at i only if s[i] is its first byte).
func (r *Redactor) mayHoldSecret(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		pair := uint16(s[i])<<8 | uint16(s[i+1])
		if r.pairs[pair/64]&(1<<(pair%64)) == 0 {
			continue // no trigger starts with these two bytes
		}
		rest := s[i:]
		for _, t := range r.byFirst[s[i]] {
			if strings.HasPrefix(rest, t) {
				return true
			}
		}
	}
	return false
}

// hasBearer reports a case-insensitive "bearer" in s: the bearer rule is
// case-insensitive, so its pre-check must be too ("BeArEr x" is a token).
func hasBearer(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if (s[i] == 'b' || s[i] == 'B') && strings.EqualFold(s[i:i+6], "bearer") {
			return true
		}
	}
	return false
}

// Redact returns s with every secret replaced.
func (r *Redactor) Redact(s string) string {
	if !r.mayHoldSecret(s) && !hasBearer(s) {
		return s
	}
	for _, ru := range r.rules {
		s = ru.re.ReplaceAllString(s, ru.repl)
	}
	return s
}

// Truncate returns at most n runes of s, never splitting a UTF-8 sequence.
// Invalid UTF-8 is replaced first so that the result round-trips through JSON.
func Truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// Summary redacts s and then truncates it to n runes: the order the audit
// log requires (a secret cut in half by truncation would otherwise escape).
func (r *Redactor) Summary(s string, n int) string { return Truncate(r.Redact(s), n) }
