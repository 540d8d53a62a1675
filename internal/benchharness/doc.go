// Command benchharness is the end-to-end benchmark harness behind
// `make bench`: it measures fluffy's real binaries (as built under ./bin)
// beside baselines taken in the same run, and writes a JSON and a Markdown
// table. Go benchmarks (`go test -bench`) cover the in-package hot paths;
// this covers whole-process figures such as plugin start to ready.
//
// It is a developer tool: it must not be imported.
package main
