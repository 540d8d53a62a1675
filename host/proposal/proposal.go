package proposal

import "github.com/fluffy-waffle/fluffy/plugins/tool"

// Output is one call's proposed changes.
type Output struct {
	Plugin, Tool, CallID string
	// Dir is the host directory the changes' artifacts are relative to.
	Dir     string
	Changes []tool.FileChange
}
