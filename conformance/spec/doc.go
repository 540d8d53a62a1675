// Package spec owns what the conformance suite promises and what a run
// reports, with no way to run it: the catalogue of items (stable IDs,
// RFC 2119 levels, API versions, sources), the profiles, the suite
// version, the report with its verdict (a skipped MUST means "not
// certified") and its text, JSON and JUnit XML writers, and the Markdown
// rendering of the catalogue in docs/conformance.md.
//
// It is a leaf: it imports the standard library only. Plugin authors link
// it through pluginsdk/plugintest, so it must never import host/, the
// runner (package conformance), the sandbox, badger or the Docker client;
// a test in pluginsdk/plugintest checks that with `go list -deps`.
package spec
