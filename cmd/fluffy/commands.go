package main

// commands lists every top-level subcommand. Each entry's implementation
// lives in its own file named after it.
func commands() []command {
	return []command{
		{name: "audit", summary: "inspect, verify, export the project's audit log", run: runAudit},
		{name: "version", summary: "print fluffy's version and the plugin API range", run: runVersion},
	}
}
