package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxSeparators bounds the spellings NameCandidates tries (2^n).
const maxSeparators = 6

// prefixes models put before a tool name (OpenAI's function namespace).
var prefixes = []string{"functions.", "functions_", "function.", "tools.", "tool."}

// NameCandidates returns the spellings of name to look up, most likely
// first, without name itself: prefixes dropped, lower-cased, and each
// '.', '_' or '-' read as '.' or '_'. Nil when name has no other spelling.
func NameCandidates(name string) []string {
	n := strings.TrimSpace(name)
	for _, p := range prefixes {
		if len(n) > len(p) && strings.EqualFold(n[:len(p)], p) {
			n = n[len(p):]
			break
		}
	}
	n = strings.ToLower(n)
	var seps []int
	for i := 0; i < len(n); i++ {
		if n[i] == '.' || n[i] == '_' || n[i] == '-' {
			seps = append(seps, i)
		}
	}
	if len(seps) > maxSeparators {
		return nil
	}
	seen := map[string]bool{name: true}
	var out []string
	b := []byte(n)
	for mask := 0; mask < 1<<len(seps); mask++ {
		// mask 0 turns every separator into '.', the namespace separator
		// of fluffy's tools, so the likeliest spelling comes first.
		for k, i := range seps {
			b[i] = '.'
			if mask&(1<<k) != 0 {
				b[i] = '_'
			}
		}
		if s := string(b); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Repairs of arguments, as UnwrapArgs reports them.
const (
	RepairJSONString = "arguments were a JSON string holding the object"
	RepairFence      = "arguments were inside a markdown code fence"
)

// UnwrapArgs returns the JSON object that args wrap: a JSON string whose
// content is the object, or a markdown fence (```json ... ```) around it,
// nested at most twice. ok is false, and args untouched, when args are an
// object already or do not unwrap to exactly one object.
func UnwrapArgs(args []byte) (obj json.RawMessage, repairs []string, ok bool) {
	cur := bytes.TrimSpace(args)
	if isObject(cur) {
		return nil, nil, false
	}
	for range 3 {
		switch {
		case len(cur) > 0 && cur[0] == '"':
			var s string
			if json.Unmarshal(cur, &s) != nil {
				return nil, nil, false
			}
			cur = bytes.TrimSpace([]byte(s))
			repairs = append(repairs, RepairJSONString)
		case bytes.HasPrefix(cur, []byte("```")):
			inner, fok := unfence(cur)
			if !fok {
				return nil, nil, false
			}
			cur = inner
			repairs = append(repairs, RepairFence)
		default:
			return nil, nil, false
		}
		if isObject(cur) {
			return json.RawMessage(cur), repairs, true
		}
	}
	return nil, nil, false
}

// Wrapped reports whether UnwrapArgs would repair args.
func Wrapped(args []byte) bool {
	_, _, ok := UnwrapArgs(args)
	return ok
}

func isObject(b []byte) bool {
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// unfence returns the body of one fenced block that is all of b: an
// opening ``` with an optional language tag of letters, and a closing ```.
func unfence(b []byte) ([]byte, bool) {
	s := string(b)
	nl := strings.IndexByte(s, '\n')
	if nl < 0 || !strings.HasSuffix(s, "```") {
		return nil, false
	}
	tag := strings.TrimSpace(s[3:nl])
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return nil, false
		}
	}
	body := strings.TrimSuffix(s[nl+1:], "```")
	if strings.Contains(body, "```") {
		return nil, false
	}
	return bytes.TrimSpace([]byte(body)), true
}
