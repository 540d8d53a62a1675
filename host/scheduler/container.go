package scheduler

import "context"

// Engine is the part of a runtime adapter (plugins/runtime.Engine) that
// preemption uses.
type Engine interface {
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Kill(ctx context.Context, id string, signal string) error
}

// Container preempts a task that runs in one container of a runtime
// adapter: pause and resume are the engine's (cgroup freezer), destroy is
// a SIGKILL (removing the container stays the launcher's cleanup).
type Container struct {
	Engine Engine
	ID     string
	// Notifier delivers PAUSE_SIGNAL and RESUME_SIGNAL to the plugin inside
	// (the router's channel to it); nil sends nothing.
	Notifier func(ctx context.Context, s Signal) error
}

// Notify delivers s through the Notifier, if any.
func (c *Container) Notify(ctx context.Context, s Signal) error {
	if c.Notifier == nil {
		return nil
	}
	return c.Notifier(ctx, s)
}

// Pause freezes the container.
func (c *Container) Pause(ctx context.Context) error { return c.Engine.Pause(ctx, c.ID) }

// Resume thaws it.
func (c *Container) Resume(ctx context.Context) error { return c.Engine.Resume(ctx, c.ID) }

// Destroy kills it.
func (c *Container) Destroy(ctx context.Context) error { return c.Engine.Kill(ctx, c.ID, "") }
