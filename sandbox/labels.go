package sandbox

// Labels on every container and volume fluffy creates. The reaper and
// `fluffy sandbox ls|gc` find fluffy's resources by them.
const (
	LabelManaged = "io.fluffy.managed"
	LabelKernel  = "io.fluffy.kernel"
	// LabelOwner is the run directory's owner id (Lease.Owner): the only
	// resources a kernel of that home may ever reap.
	LabelOwner    = "io.fluffy.owner"
	LabelSession  = "io.fluffy.session"
	LabelPlugin   = "io.fluffy.plugin"
	LabelInstance = "io.fluffy.instance"
	LabelTemplate = "io.fluffy.template"
)

func labelsFor(spec LaunchSpec, template string) map[string]string {
	return map[string]string{
		LabelManaged:  "1",
		LabelKernel:   spec.KernelID,
		LabelOwner:    spec.Owner,
		LabelSession:  spec.SessionID,
		LabelPlugin:   spec.Name,
		LabelInstance: spec.InstanceID,
		LabelTemplate: template,
	}
}
