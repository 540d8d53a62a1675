package yamlpos

import (
	"errors"

	"gopkg.in/yaml.v3"
)

// Pos is a 1-based line and column; the zero Pos is "no position".
type Pos struct{ Line, Col int }

// Of is where n starts (the zero Pos for nil).
func Of(n *yaml.Node) Pos {
	if n == nil {
		return Pos{}
	}
	return Pos{n.Line, n.Column}
}

// Field is where a field's problems are reported: the value for scalars
// and flow collections, the key for a block mapping or list (whose value
// starts on the next line).
func Field(k, v *yaml.Node) Pos {
	if (v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && v.Style&yaml.FlowStyle == 0 {
		return Of(k)
	}
	return Of(v)
}

// Join is the dotted path of key under path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Pair is one key/value pair of a mapping.
type Pair struct {
	Key, Value *yaml.Node
	// Path is the key's dotted path below the walk's root.
	Path string
}

// Pairs calls f with each key/value pair of mapping n, in document order,
// each Path under path; it stops at f's first error and returns it. A
// node that is not a mapping has no pairs.
func Pairs(n *yaml.Node, path string, f func(p Pair) error) error {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := f(Pair{Key: k, Value: v, Path: Join(path, k.Value)}); err != nil {
			return err
		}
	}
	return nil
}

// Leaves walks the nested mappings below n and calls f with every pair
// whose value is not itself a mapping, its Path dotted from n.
func Leaves(n *yaml.Node, f func(p Pair)) {
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		_ = Pairs(n, path, func(p Pair) error {
			if p.Value.Kind == yaml.MappingNode {
				walk(p.Value, p.Path)
			} else {
				f(p)
			}
			return nil
		})
	}
	walk(n, "")
}

// Seen finds repeated keys of one mapping: the line each key was first
// given on.
type Seen map[string]int

// Repeat records k and, when its value was seen before, returns the line
// of the first one and true.
func (s Seen) Repeat(k *yaml.Node) (first int, dup bool) {
	if line, ok := s[k.Value]; ok {
		return line, true
	}
	s[k.Value] = k.Line
	return 0, false
}

// Kind names n's kind in one word: mapping, list, scalar, alias or
// document.
func Kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// Value is the value of the first key named key in mapping m; nil when m
// is not a mapping or has no such key.
func Value(m *yaml.Node, key string) *yaml.Node {
	var found *yaml.Node
	_ = Pairs(m, "", func(p Pair) error {
		if p.Key.Value == key {
			found = p.Value
			return errStop
		}
		return nil
	})
	return found
}

var errStop = errors.New("stop")
