// Package nearest owns fluffy's one "did you mean" rule: the known name
// closest to a mistyped one by edit distance, within a bound. Manifests use
// it for fields, kinds and templates, the CLI for a mistyped command.
//
// It is a leaf (standard library only, cheap to link from a plugin's test
// kit) and says nothing about what the names mean.
package nearest
