package provider

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// MaxWireNameLen is the longest function name every supported provider
// accepts (OpenAI: ^[a-zA-Z0-9_-]{1,64}$; Anthropic allows 128).
const MaxWireNameLen = 64

// WireName is how a fluffy tool name travels to a model: every character
// outside [a-zA-Z0-9_-] becomes '_' ("fs.read" → "fs_read").
func WireName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ToolNames maps fluffy tool names to wire names and back exactly.
type ToolNames struct {
	toWire   map[string]string
	fromWire map[string]string
}

// NewToolNames checks that every name maps to a distinct, valid wire name.
// A collision is an error naming both tools.
func NewToolNames(names []string) (*ToolNames, error) {
	t := &ToolNames{toWire: map[string]string{}, fromWire: map[string]string{}}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var problems []string
	for _, n := range sorted {
		if _, dup := t.toWire[n]; dup {
			continue
		}
		w := WireName(n)
		switch {
		case n == "":
			problems = append(problems, "an empty tool name")
			continue
		case len(w) > MaxWireNameLen:
			problems = append(problems, fmt.Sprintf("tool %q is %d characters long; providers accept at most %d", n, len(w), MaxWireNameLen))
			continue
		}
		if other, clash := t.fromWire[w]; clash {
			problems = append(problems, fmt.Sprintf("tools %q and %q both travel to the model as %q", other, n, w))
			continue
		}
		t.toWire[n], t.fromWire[w] = w, n
	}
	if len(problems) > 0 {
		return nil, uerr.New(CodeToolNames, "tool names cannot be sent to AI providers",
			strings.Join(problems, "; ")+" (providers refuse dots and other punctuation in function names, so fluffy sends them with '_')",
			"rename one of the tools in its plugin.yaml, or disable one of the plugins with `fluffy plugin disable NAME`")
	}
	return t, nil
}

// Wire returns the wire name of a fluffy tool name (WireName for names the
// map does not know).
func (t *ToolNames) Wire(name string) string {
	if t != nil {
		if w, ok := t.toWire[name]; ok {
			return w
		}
	}
	return WireName(name)
}

// Fluffy maps a wire name back. A name the map does not know (a model
// inventing a tool) comes back unchanged with ok=false; the kernel then
// reports an unknown tool to the model.
func (t *ToolNames) Fluffy(wire string) (string, bool) {
	if t != nil {
		if n, ok := t.fromWire[wire]; ok {
			return n, true
		}
	}
	return wire, false
}

// ToolNamesOf builds the map for a request's tools.
func ToolNamesOf(tools []ToolSpec) (*ToolNames, error) {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return NewToolNames(names)
}
