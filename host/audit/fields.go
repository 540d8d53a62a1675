package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Field bounds: a plugin controls paths, syscall names,
// reasons and metadata values, so every string a record stores is bounded.
// A longer value keeps its first bytes and ends with a marker naming its
// full length and the SHA-256 of the original, so whoever holds the
// original can prove it is the one that was recorded.
const (
	// MaxFieldBytes bounds the short fields (syscall, tool, caller, ids,
	// rule, sandbox) and each metadata value.
	MaxFieldBytes = 1024
	// MaxReasonBytes bounds deny_reason.
	MaxReasonBytes = 4096
	// MaxMetadataKeys bounds how many metadata entries a record keeps
	// (the first in key order; MetaDropped counts the rest).
	MaxMetadataKeys = 32
	// MaxMetadataKeyBytes bounds one metadata key.
	MaxMetadataKeyBytes = 64
	// redactWindow is how much of a long value redaction scans; the
	// value is cut to its field bound afterwards, so a secret straddling
	// the window's end is never stored in part.
	redactWindow = 64 << 10
)

// MetaDropped counts metadata entries beyond MaxMetadataKeys.
const MetaDropped = "metadata_dropped"

// bound returns s (valid UTF-8) cut to max bytes with the truncation
// marker, redacted first when redact is set.
func (l *Log) bound(s string, max int, redact bool) string {
	orig := s
	if len(s) > redactWindow {
		s = s[:runeCut(s, redactWindow)]
	}
	s = validUTF8(s)
	if redact {
		s = l.red.Redact(s)
	}
	if len(orig) <= max && len(s) <= max {
		return s
	}
	if len(s) > max {
		s = s[:runeCut(s, max)]
	}
	sum := sha256.Sum256([]byte(orig))
	return s + "…[truncated: " + strconv.Itoa(len(orig)) + " bytes, sha256:" + hex.EncodeToString(sum[:]) + "]"
}

// runeCut is the largest index <= n at a rune boundary of s.
func runeCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// boundMetadata copies md with keys and values bounded and at most
// MaxMetadataKeys entries.
func (l *Log) boundMetadata(md map[string]string) map[string]string {
	out := make(map[string]string, min(len(md), MaxMetadataKeys)+2)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dropped := 0
	for _, k := range keys {
		if len(out) >= MaxMetadataKeys {
			dropped++
			continue
		}
		out[l.bound(k, MaxMetadataKeyBytes, false)] = l.bound(md[k], MaxFieldBytes, true)
	}
	if dropped > 0 {
		out[MetaDropped] = strconv.Itoa(dropped)
	}
	return out
}
