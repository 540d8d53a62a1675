package router

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// redactText removes secrets from one string: the built-in prefixes
// (lib/redact) and the policy's sanitize patterns. It returns the
// new text and how many replacements were made.
func (r *Router) redactText(s string, pats []policy.SanitizePattern) (string, int) {
	n := 0
	if red := r.o.Redactor.Redact(s); red != s {
		n++
		s = red
	}
	for _, p := range pats {
		if p.Re.MatchString(s) {
			n += len(p.Re.FindAllStringIndex(s, -1))
			s = p.Re.ReplaceAllLiteralString(s, "[REDACTED:"+p.Name+"]")
		}
	}
	return s, n
}

// sanitize redacts every string (keys included) of a JSON document. The
// text is decoded and re-encoded only when a secret was found, so
// redaction can never break the JSON (a pattern applied to the raw bytes
// could swallow a closing quote). Numbers keep their exact spelling.
func (r *Router) sanitize(doc json.RawMessage) (json.RawMessage, int, error) {
	if len(doc) == 0 {
		return doc, 0, nil
	}
	pats := r.patterns()
	// Fast path: nothing in the raw text looks like a secret.
	if red, n := r.redactText(string(doc), pats); n == 0 && red == string(doc) {
		return doc, 0, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, 0, fmt.Errorf("decode output: %w", err)
	}
	total := 0
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case string:
			s, n := r.redactText(t, pats)
			total += n
			return s
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
			return t
		case map[string]any:
			out := make(map[string]any, len(t))
			for k, val := range t {
				nk, n := r.redactText(k, pats)
				total += n
				out[nk] = walk(val)
			}
			return out
		}
		return x
	}
	v = walk(v)
	if total == 0 {
		return doc, 0, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, 0, fmt.Errorf("encode sanitized output: %w", err)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), total, nil
}

// sanitizeError redacts the text of a plugin's structured error.
func (r *Router) sanitizeError(e *uerr.Error, count *int) *uerr.Error {
	pats := r.patterns()
	c := *e
	var n int
	c.What, n = r.redactText(c.What, pats)
	*count += n
	c.Why, n = r.redactText(c.Why, pats)
	*count += n
	c.Fix, n = r.redactText(c.Fix, pats)
	*count += n
	c.Context, n = r.redactText(c.Context, pats)
	*count += n
	c.Err = nil
	return &c
}

// patterns are the sanitize patterns of the policy in force now.
func (r *Router) patterns() []policy.SanitizePattern {
	if p := r.o.Policy.Policy(); p != nil {
		return p.Sanitize
	}
	return nil
}
