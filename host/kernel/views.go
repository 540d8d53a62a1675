package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"

	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// openSession opens the session workspace: o.SessionID's, or a private one
// removed when the kernel closes.
func (k *Kernel) openSession(ctx context.Context, o Options) error {
	id := o.SessionID
	if id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id, k.ephemeral = "kernel-"+hex.EncodeToString(b[:]), true
	}
	reader := workspace.Identity{UID: os.Getuid(), GID: os.Getgid()}
	if o.Launcher == nil && (o.Sandbox == "" || o.Sandbox == SandboxDocker) {
		reader.UID, reader.GID = sandbox.GuestIdentity()
	}
	s, err := workspace.Open(ctx, id, workspace.Options{Home: o.Home, Project: o.Workspace, Judge: k.Policy, Reader: reader, Logger: o.Logger,
		DB: k.ProjectDB, Identify: k.identify})
	if err != nil {
		return err
	}
	k.Session = s
	return nil
}

// callerOf is who a plugin is to the policy.
func callerOf(spec supervisor.Spec, instance string) policy.Caller {
	return policy.Caller{Kind: "plugin", Plugin: spec.Name, PluginKind: string(spec.Kind), Instance: instance, Tags: spec.Tags, Hosts: spec.Network}
}

// views gives tool and VCS plugins their session view as /workspace.
// Providers and policy extensions get no project files at all: what they
// need reaches them through their calls.
type views struct {
	k    *Kernel
	mode string
}

func (v views) View(ctx context.Context, spec supervisor.Spec) (string, error) {
	if spec.Kind != base.KindTool && spec.Kind != base.KindVCS {
		return "", nil
	}
	view, err := v.k.Session.Prepare(ctx, workspace.Reader{Caller: callerOf(spec, ""), SessionMode: v.mode, Sandbox: v.k.sandboxOf(spec)})
	if err != nil {
		return "", err
	}
	return view.Dir, nil
}

// identify is who a plugin's proposed writes are judged as at ingest: the
// same request the router built for the call (registry tags, sandbox
// template, session mode, workflow state).
func (k *Kernel) identify(ctx context.Context, plugin, toolName string) (policy.Request, error) {
	t, err := k.catalog.Lookup(plugin, toolName)
	if err != nil {
		return policy.Request{}, err
	}
	st := ""
	if f := k.gateState.Load(); f != nil {
		st = (*f)()
	}
	return router.Requests(t, &router.Session{Mode: k.sessionMode}, st, nil)[0].Request, nil
}
