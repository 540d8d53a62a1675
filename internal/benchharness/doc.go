// Command benchharness is the end-to-end benchmark harness behind
// `make bench`: it measures fluffy's real binaries (as built under ./bin)
// beside baselines taken in the same run, and writes a JSON and a Markdown
// table. Go benchmarks (`go test -bench`) cover the in-package hot paths;
// this covers whole-process figures such as plugin start to ready.
//
// Suites (-only NAME): plugin, workspace, task (the demo task end to end
// and kernel memory), memory (kernel memory alone), parallel (ten tool
// calls in one turn), cli (kernel cold start, IPC ping, event stream),
// flood (a misbehaving plugin's floods of output, progress and kernel
// callbacks: outcome, RSS and disk growth of each). The task, memory,
// parallel and flood suites run the kernel in this process on the plugins
// under -bin/plugins and need Docker; cli runs -bin/fluffy.
// Run it from the repository root (it reads examples/).
//
// It is a developer tool: it must not be imported.
package main
