// Package kerneltest runs builtin plugins the way fluffy runs them, for the
// plugins' own tests and benchmarks: it builds the plugin and the
// runtime-docker adapter, stamps the manifest, opens a real kernel with the
// docker sandbox on a short $FLUFFY_HOME, installs the plugin as a builtin,
// and calls its tools inside real L2 containers.
//
// It is test support only: it must not be imported by fluffy's own
// binaries, and it fakes nothing (no launcher, policy or runtime doubles).
package kerneltest
