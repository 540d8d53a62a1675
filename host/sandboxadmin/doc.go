// Package sandboxadmin is what the CLI does with the container engine
// outside a kernel: the `fluffy sandbox` verbs (list and reap this home's
// sandbox resources through a runtime adapter of their own), and the
// facts the bootstrap needs to start a kernel in L1 (the engine's socket,
// the L1 base image, how to install an engine) and `fluffy plugin new`
// needs of a plugin binary (a static ELF for the L2 sandbox).
//
// It must not start kernels or plugins, and must not decide what a
// sandbox may do: the sandbox package holds the runtime and its rules.
package sandboxadmin
