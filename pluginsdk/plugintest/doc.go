// Package plugintest is the test kit for plugin authors: run a tool plugin
// in-process over a real gRPC connection, or build it and launch the binary
// through go-plugin exactly as the kernel does, then call it.
//
// It must not import host/: authors use it without linking the kernel.
package plugintest
