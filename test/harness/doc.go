// Package harness is what the end-to-end and fault suites share to drive
// fluffy as a person at a shell does: the binaries `make build` made, a
// project in a fresh git repository, `fluffy` and `git` run in it, and a
// scripted model's turns.
//
// It is test support only: it must not be imported by fluffy's binaries,
// and it must not import the kernel's packages — every step goes through
// the fluffy command line.
package harness
