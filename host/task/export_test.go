package task

import (
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// NewReviewTasks is a task runner with only its review path, for tests
// outside the package: interactive, its events sent to events, and its
// "always" amending file (trusted through pins) over d.Policy, recorded by
// au.
func NewReviewTasks(d *Deps, file string, pins *pin.Store, au Auditor, events chan agent.Event) *Tasks {
	return &Tasks{k: d, log: hclog.NewNullLogger(), interactive: true, subs: map[chan agent.Event]struct{}{events: {}},
		reviews: map[string]pendingReview{}, approved: map[string]bool{},
		am: &amender{engine: d.Policy, path: file, pins: pins, project: d.Workspace, audit: au}}
}

// ToolApprover is the runner's router.Approver of the model's tool calls.
func ToolApprover(t *Tasks) router.Approver { return toolApprover{t} }
