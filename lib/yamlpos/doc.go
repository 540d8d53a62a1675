// Package yamlpos is the one walk over a YAML node tree that keeps track of
// where things are: a node's line and column, the position a field's
// problems are reported at, a mapping's key/value pairs in order with
// their dotted paths and repeated keys found, and a node's kind in words.
//
// It is a leaf: it imports only the YAML library and knows nothing of
// manifests, policies or settings. Each reader (manifests, policy,
// host/config) keeps its own rules and error shapes and walks with this.
package yamlpos
