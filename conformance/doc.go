// Package conformance is the kernel side of the certification suite: the
// runner that executes the items against a plugin binary under a private
// supervisor with scratch directories, the L2 sandbox it opens for them,
// and the conversion of a report into the registry's certification record
// (Certification). The catalogue (stable IDs, RFC 2119 levels, API
// versions, sources), the profiles and the reports (text, JSON, JUnit XML)
// live in the leaf subpackage spec, re-exported here under the same names,
// so that plugin authors can link them without the kernel; this package
// must not be imported by pluginsdk/... or plugins/... (the test kit runs
// it as the command cmd/suiterun).
//
// A report's verdict is "certified" only when every MUST item that applies
// passed: a skipped MUST (not checked) counts against the plugin like a
// failed one; items that do not apply are "n/a".
//
// Hostile behaviour is tested for real: the plugin runs as a plain child
// process for the behavioural items (so a path escape or a workspace write
// is observed, not contained), or with Options.Contained every item in its
// L2 container, and inside its L2 container for the sandbox-fitness items
// (whose promises are checked on the running container: engine view and
// /proc). Provider plugins reach the fake upstream only through the
// kernel's CONNECT proxy (sandbox.StartProxy, or the container launcher's
// own), and every tunnel is counted against the upstream's connections; runtime adapters run in the kernel's adapter jail
// (bubblewrap with only the engine socket) and the runtime profile drives
// real containers from the L2 base image through them, checking each by the
// engine's own record (State.Config, read through fluffy's builtin
// runtime-docker adapter, never the adapter under test; it also removes
// everything the run created, even when an item fails); "kernel disappears" is a real SIGKILL of a stub
// kernel process (StubKernelMain). Subpackage fakes is the fake upstream
// model server; the repository's internal/fixtures/any-broken the deliberately broken plugins;
// cmd/stubkernel and cmd/suiterun the commands built from it.
//
// It must not install or trust plugins itself (the registry records its
// verdict; `fluffy plugin install` decides), must not touch the user's
// project or plugin store, and leaves nothing behind after Run.
package conformance
