// Package runtime is the protocol contract of the `runtime` plugin kind: the
// container-runtime adapters (runtime-docker, for the Docker Engine API). It owns the Go types, the Plugin interface an
// adapter implements, the Client interface the kernel holds, and the
// go-plugin shim. API v1 and v2 share one service. It must not import host/
// or sandbox/, and it knows nothing about templates or policy: the sandbox
// package decides what a container looks like; an adapter only executes it.
//
// guest.go also holds the small piece every plugin that runs inside a
// runtime sandbox links in: it makes the plugin exit once its kernel is gone.
package runtime
