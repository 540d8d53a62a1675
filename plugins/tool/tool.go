package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// PluginName is the key under which a tool plugin is dispensed.
const PluginName = "tool"

// Output modes and lifetimes (DESIGN.md "Manifest").
const (
	OutputPatch     = "patch"
	OutputFull      = "full"
	LifetimeSession = "session"
	LifetimePerCall = "per_call"
)

// Def describes one tool a plugin offers.
type Def struct {
	Name       string          `json:"name"`
	Summary    string          `json:"summary"`
	Parameters json.RawMessage `json:"parameters"`
	OutputMode string          `json:"output_mode"`
	Lifetime   string          `json:"lifetime"`
}

// Call is one invocation of a tool by name.
type Call struct {
	ID          string
	Tool        string
	Args        json.RawMessage
	SessionID   string
	SessionMode string
	// OperationID names the output subdirectory <out>/<OperationID>/.
	OperationID string
	// Deadline is carried on the wire from API v2 on; v1 plugins only see
	// the RPC deadline.
	Deadline time.Time
}

// FileChange is a write a tool proposes through its output directory.
type FileChange struct {
	Path         string `json:"path"`
	Mode         string `json:"mode"`
	Artifact     string `json:"artifact"`
	SHA256Before string `json:"sha256_before,omitempty"`
	SHA256After  string `json:"sha256_after,omitempty"`
	Delete       bool   `json:"delete,omitempty"`
}

// Result is the outcome of a call. A tool-level failure (bad arguments, a
// path outside the root) is a Result with Err set, not a Go error: the Go
// error of Execute is reserved for transport and plugin failures.
type Result struct {
	OK        bool            `json:"ok"`
	Output    json.RawMessage `json:"output,omitempty"`
	Changes   []FileChange    `json:"changes,omitempty"`
	Err       *uerr.Error     `json:"error,omitempty"`
	Cancelled bool            `json:"cancelled,omitempty"`
}

// Progress is a streamed progress event (API v2 and later).
type Progress struct {
	Message  string
	Fraction float64 // 0..1, or -1 when unknown
	Time     time.Time
}

// Plugin is what a tool plugin implements.
type Plugin interface {
	base.Plugin
	Tools(ctx context.Context) ([]Def, error)
	// Execute runs one call. report may be called any number of times; under
	// API v1 it is a no-op. ctx is cancelled when the kernel cancels the call.
	Execute(ctx context.Context, call Call, report func(Progress)) (Result, error)
}

// Client is the kernel's view of a running tool plugin, the same whichever
// API version was negotiated.
type Client interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
	Tools(ctx context.Context) ([]Def, error)
	// Execute runs call; onProgress receives progress events (never under v1).
	// Cancelling ctx cancels the call: under v2 the plugin is told why and
	// gets a grace period to return a cancelled Result.
	Execute(ctx context.Context, call Call, onProgress func(Progress)) (Result, error)
}

// PluginSets returns the go-plugin version map for a tool implementation
// serving the given API versions (nil impl: the kernel side).
func PluginSets(impl Plugin, versions []int) map[int]plugin.PluginSet {
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		switch v {
		case 1:
			sets[1] = plugin.PluginSet{PluginName: &GRPCPluginV1{Impl: impl}}
		case 2:
			sets[2] = plugin.PluginSet{PluginName: &GRPCPluginV2{Impl: impl}}
		}
	}
	return sets
}
