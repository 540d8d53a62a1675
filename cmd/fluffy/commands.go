package main

// commands lists every top-level subcommand. Each entry's implementation
// lives in its own file named after it.
func commands() []command {
	return []command{
		{name: "conformance", summary: "list the conformance catalogue; run it on a plugin (JSON/JUnit reports)", run: runConformance},
		{name: "plugin", summary: "install, list, inspect, enable, disable and remove plugins", run: runPlugin},
		{name: "sandbox", summary: "list (ls) and clean up (gc) plugin sandbox containers", run: runSandbox},
		{name: "audit", summary: "inspect, verify, export the project's audit log", run: runAudit},
		{name: "version", summary: "print fluffy's version and the plugin API range", run: runVersion},
		{name: "session", summary: "list, show, resume, archive or start this project's sessions", run: runSession},
		{name: "attach", summary: "follow the project's running task (after the terminal that started it left)", run: runAttach},
		{name: "kernel", summary: "run the project's kernel process (normally started for you); status, stop", run: runKernel},
		{name: "init", summary: "set fluffy up for this project: detect it, pick a provider, write .fluffy/config.yaml", run: runInit},
		{name: "config", summary: "init, get, set and show settings (flags > FLUFFY_* > project > user > defaults)", run: runConfig},
		{name: "policy", summary: "show, validate, explain, update and trust the security policy", run: runPolicy},
		{name: "mcp", summary: "add, list, remove MCP servers and list their tools (each runs in its own sandbox)", run: runMCP},
		{name: "prompt", summary: "show the system prompt the model reads next (workflow, project brief, tools)", run: runPrompt},
	}
}
