// Package pluginsdk is what plugin authors import. A plugin's main calls
// one function — ServeTool, ServeProvider, ServeVCS, ServePolicy,
// ServeRuntime — and gets the go-plugin handshake, every API version its
// kind has, hclog JSON logging on stderr (which go-plugin forwards to the
// kernel's log), and a client for the kernel callback service.
//
// ToolSet is the convenient way to write a tool plugin: a name, a version
// and a list of tools with handlers.
//
// It must not import host/: plugins never link the kernel.
package pluginsdk
