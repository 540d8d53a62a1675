package kernel

import (
	"github.com/fluffy-waffle/fluffy/host/callbacks"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/plugins/kernel"
	"github.com/fluffy-waffle/fluffy/policy"
)

// kernelService is the callback service of one plugin instance: the
// kernel lends it its policy, audit log, current session view and
// progress sink (read per call, as sessions and tasks change).
func (k *Kernel) kernelService(instanceID string, spec supervisor.Spec, peer func() supervisor.Peer) kernel.Service {
	in := callbacks.Instance{ID: instanceID, Plugin: spec.Name, Capabilities: spec.Capabilities,
		Caller: callerOf(spec, instanceID), Sandbox: k.sandboxOf(spec)}
	if peer != nil {
		in.Peer = func() policy.Peer {
			p := peer()
			return policy.Peer{PID: p.PID, ContainerID: p.ContainerID}
		}
	}
	return callbacks.New(callbacks.Deps{
		Log:      k.log,
		Judge:    k.Policy,
		Audit:    k.auditor(),
		View:     func(plugin string) (*confine.Root, error) { return k.Session.ViewRoot(plugin) },
		Progress: func() func(string) { return k.progress },
	}, in)
}
