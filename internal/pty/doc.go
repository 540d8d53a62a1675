// Package pty opens pseudo-terminal pairs for benchmarks and tests that
// measure fluffy as a person sees it on a terminal. It owns nothing else and
// must not start processes.
package pty
