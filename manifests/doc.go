// Package manifests owns plugin.yaml: its schema, parsing with line numbers,
// validation, the entry binary's checksum, and the per-tool argument schemas
// declared in it (DESIGN.md "Plugins" → Manifest, "Plugin System
// Module" → Plugin Manifest).
//
// Everything a caller needs about one plugin before it is started comes from
// here: Load/Parse turn a plugin.yaml into a *Manifest or a *ValidationError
// that lists every problem with file, line, field and fix; VerifyChecksum
// compares the entry binary with the declared sha256; Tool.ValidateArgs checks
// a tool call's arguments against the JSON Schema compiled at load time.
//
// It must not touch anything beyond the plugin directory it was pointed at:
// no registry state, no policy decisions (whether a capability or a sandbox
// override is allowed is the policy's call), no process or container
// start-up, and no network (JSON Schema $refs are never fetched). It imports
// only uerr from fluffy.
package manifests
