// Package plugintest is the test kit for plugin authors: run a tool plugin
// in-process over a real gRPC connection, or build it and launch the binary
// through go-plugin exactly as the kernel does, then call it; check that
// plugin.yaml and the Go tool definitions agree; and run fluffy's
// conformance suite on the plugin.
//
// It must not import host/, the conformance runner, the sandbox, badger or
// the Docker client, directly or through anything it imports: authors link
// it without the kernel. The conformance suite's runner is built and run as
// a separate binary (conformance/cmd/suiterun); only its leaf package
// conformance/spec (catalogue and report) is linked. TestAuthorDependencies
// checks this for pluginsdk/... and plugins/... with `go list -deps`.
package plugintest
