package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// sandboxSup starts (once) a second private supervisor whose launcher is
// the L2 container launcher.
func (p *probe) sandboxSup(ctx context.Context) (*supervisor.Supervisor, error) {
	if p.sbx != nil || p.sbxErr != nil {
		return p.sbx, p.sbxErr
	}
	p.sbxRec = &recorder{inner: p.r.opts.Sandbox}
	sup, err := p.newSupervisor(p.sbxRec, filepath.Join(p.dir, "out-l2"))
	if err != nil {
		p.sbxErr = err
		return nil, err
	}
	p.onClose(sup.Close)
	p.sbxErr = sup.Use(ctx, p.m.Name, base.Kind(p.m.Kind), func(context.Context, any) error { return nil })
	if p.sbxErr == nil {
		p.sbx = sup
	}
	return p.sbx, p.sbxErr
}

// sandboxStart starts the plugin in its L2 container, has it answer Info
// and Health there, and checks each promise of CORE-SANDBOX-001 on the
// running container (sandboxFacts).
func sandboxStart(ctx context.Context, p *probe) outcome {
	sup, err := p.sandboxSup(ctx)
	if err != nil {
		return fail("the plugin did not start inside its L2 sandbox (template %s): %s\nfix: the plugin must not need a writable root, root privileges or network at start; write only under its output directory", p.template(), errText(err))
	}
	err = sup.Use(ctx, p.m.Name, base.Kind(p.m.Kind), func(ctx context.Context, raw any) error {
		_, err := raw.(baseOf).Info(ctx)
		return err
	})
	if err != nil {
		return fail("inside its L2 sandbox the plugin does not answer Info: %s", errText(err))
	}
	health := "Health answered"
	if err := sup.Use(ctx, p.m.Name, base.Kind(p.m.Kind), func(ctx context.Context, raw any) error { return raw.(baseOf).Health(ctx) }); err != nil {
		// A plugin that is unhealthy everywhere fails CORE-HEALTH-001; this
		// item is about what the sandbox breaks.
		outside := p.ensureStarted()
		if outside == nil {
			outside = p.use(ctx, func(ctx context.Context, raw any) error { return raw.(baseOf).Health(ctx) })
		}
		if outside == nil {
			return fail("inside its L2 sandbox the plugin's Health fails, outside it passes: %s\nfix: the plugin must work with a read-only root, a non-root uid and no network", errText(err))
		}
		health = "Health fails outside the sandbox too (see CORE-HEALTH-001)"
	}
	status := p.sbxRec.last()
	if status == nil || status().ContainerID == "" {
		return skip("the sandbox launcher did not say which container the plugin runs in, so its confinement was not checked")
	}
	engine, why, err := p.engineView(ctx)
	if engine == nil {
		if err != nil {
			why = err.Error()
		}
		return skip("the plugin's container was not inspected, so its confinement was not checked: %s", why)
	}
	seen, problems, err := sandboxFacts(ctx, engine, status().ContainerID, p.template())
	if err != nil {
		return skip("the plugin's container was not inspected, so its confinement was not checked: %v", err)
	}
	if len(problems) > 0 {
		return fail("the plugin answered, but its sandbox is not what the template promises:\n- %s\nfix: this is the launcher's doing, not the plugin's: report it to fluffy", strings.Join(problems, "\n- "))
	}
	return pass("started in template %s; Info answered; %s; %s", p.template(), health, strings.Join(seen, "; "))
}

// template is the L2 template the plugin runs in.
func (p *probe) template() string {
	if p.m.Sandbox.Template != "" {
		return p.m.Sandbox.Template
	}
	return sandbox.DefaultTemplate(p.m.Kind)
}

func sandboxSmoke(ctx context.Context, p *probe) outcome {
	sup, err := p.sandboxSup(ctx)
	if err != nil {
		return skip("the plugin did not start in its sandbox (see CORE-SANDBOX-001)")
	}
	var what string
	err = sup.Use(ctx, p.m.Name, base.Kind(p.m.Kind), func(ctx context.Context, raw any) error {
		switch c := raw.(type) {
		case tool.Client:
			ds, err := c.Tools(ctx)
			if err != nil {
				return err
			}
			what = fmt.Sprintf("ListTools returned %d tools", len(ds))
			if len(ds) > 0 {
				args := []byte(`{}`)
				if mt, ok := p.m.Tool(ds[0].Name); ok {
					if s, ok := parseSchema(mt.ParametersJSON); ok {
						over := map[string]any{}
						if prop := findProp(s, pathProps); prop != "" {
							over[prop] = "README.md"
						}
						args = argsFor(s, over)
					}
				}
				res, err := c.Execute(ctx, tool.Call{ID: "sbx-1", Tool: ds[0].Name, Args: args, OperationID: "sbx-1"}, nil)
				if err != nil {
					return err
				}
				what += fmt.Sprintf("; %s answered (ok=%v)", ds[0].Name, res.OK)
			}
		case provider.Client:
			ms, err := c.Models(ctx)
			if err != nil {
				return err
			}
			what = fmt.Sprintf("Models returned %d models", len(ms))
		case vcs.Client:
			if _, err := c.Log(ctx, 1); err != nil && !isStructured(err) {
				return err
			}
			what = "Log answered"
		case policyext.Client:
			d, err := c.Evaluate(ctx, policyext.Request{Syscall: "fs.read", Path: "README.md"})
			if err != nil && !isStructured(err) {
				return err
			}
			what = "Evaluate answered " + d.Decision
		default:
			return fmt.Errorf("no smoke call for %T", raw)
		}
		return nil
	})
	if err != nil {
		return fail("inside its L2 sandbox the plugin's smoke call failed: %s\nfix: the plugin must work with a read-only root, a non-root uid and no network", errText(err))
	}
	return pass("%s", what)
}

// isStructured reports whether err is the plugin's own structured answer,
// not a crash, timeout or protocol violation the kernel diagnosed (those
// carry PLUGIN_* codes).
func isStructured(err error) bool {
	ue, ok := uerr.As(err)
	return ok && ue.Code != "" && ue.Code != "INTERNAL" && !strings.HasPrefix(ue.Code, "PLUGIN_")
}
