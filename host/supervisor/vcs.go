package supervisor

import (
	"context"
	"fmt"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// UseVCS runs f with the client of VCS plugin name and the host directory
// of the serving instance's /out (where a commit's objects land), starting
// the plugin if needed. Errors count like Use's.
func (s *Supervisor) UseVCS(ctx context.Context, name string, f func(ctx context.Context, c vcs.Client, outDir string) error) error {
	return s.useInstance(ctx, name, base.KindVCS, "", func(ctx context.Context, inst *Instance) error {
		c, ok := inst.Raw.(vcs.Client)
		if !ok {
			return fmt.Errorf("plugin %s: dispensed %T, not a vcs client", name, inst.Raw)
		}
		return f(ctx, c, inst.OutDir)
	})
}
