package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Resource is one fluffy-managed container or volume.
type Resource struct {
	Kind      string // "container" or "volume"
	ID        string
	Name      string
	Status    string
	KernelID  string
	SessionID string
	Plugin    string
	Template  string
	Created   time.Time
	// Owner is the run-directory owner label; Mine says it is this home's.
	Owner string
	Mine  bool
	// KernelLive is only meaningful for Mine resources: another home's
	// leases are not visible from here.
	KernelLive bool
}

// Orphan reports whether the resource provably belongs to a dead kernel:
// it is this home's (owner label) and its kernel's lease is not held.
// Resources of other homes, other users or older fluffy versions (no owner
// label) are never orphans from here, whatever their state.
func (r Resource) Orphan() bool { return r.Mine && !r.KernelLive }

// Inventory lists every fluffy-managed container and volume on the engine
// and, for those of this home (owner label = runDir's owner id), whether
// its kernel instance is alive (by its lease under runDir).
func Inventory(ctx context.Context, r Runtime, runDir string) ([]Resource, error) {
	owner, err := RunDirOwner(runDir)
	if err != nil {
		return nil, err
	}
	sel := map[string]string{LabelManaged: "1"}
	cs, err := r.List(ctx, sel, true)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	vs, err := r.ListVolumes(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list sandbox volumes: %w", err)
	}
	alive := map[string]bool{}
	live := func(o, id string) bool {
		if o != owner {
			return false
		}
		v, ok := alive[id]
		if !ok {
			v = KernelAlive(runDir, id)
			alive[id] = v
		}
		return v
	}
	out := make([]Resource, 0, len(cs)+len(vs))
	for _, c := range cs {
		k := c.Labels[LabelKernel]
		if k == "" { // the base image's label is on images only; skip odd ones
			continue
		}
		o := c.Labels[LabelOwner]
		out = append(out, Resource{Kind: "container", ID: c.ID, Name: c.Name, Status: c.Status, KernelID: k,
			SessionID: c.Labels[LabelSession], Plugin: c.Labels[LabelPlugin], Template: c.Labels[LabelTemplate],
			Created: c.Created, Owner: o, Mine: o == owner, KernelLive: live(o, k)})
	}
	for _, v := range vs {
		k, o := v.Labels[LabelKernel], v.Labels[LabelOwner]
		out = append(out, Resource{Kind: "volume", ID: v.Name, Name: v.Name, KernelID: k,
			SessionID: v.Labels[LabelSession], Plugin: v.Labels[LabelPlugin], Owner: o, Mine: o == owner, KernelLive: live(o, k)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// ReapReport says what a reap removed and what it could not.
type ReapReport struct {
	Containers []string
	Volumes    []string
	RunDirs    []string
	Errors     []error
}

// Reap removes every fluffy container and volume whose kernel instance is
// dead (all of them, including live kernels', when all is set), and the run
// directories (socket and jail dirs) of dead kernels. Each removal is
// independent: one failure does not stop the rest.
func Reap(ctx context.Context, r Runtime, runDir string, all bool) (ReapReport, error) {
	var rep ReapReport
	inv, err := Inventory(ctx, r, runDir)
	if err != nil {
		return rep, err
	}
	for _, res := range inv {
		if !res.Mine || (res.KernelLive && !all) {
			continue
		}
		switch res.Kind {
		case "container":
			if err := r.Remove(ctx, res.ID, true, true); err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("remove container %s: %w", res.Name, err))
				continue
			}
			rep.Containers = append(rep.Containers, res.Name)
		case "volume":
			if err := r.RemoveVolume(ctx, res.ID, true); err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("remove volume %s: %w", res.Name, err))
				continue
			}
			rep.Volumes = append(rep.Volumes, res.Name)
		}
	}
	rep.RunDirs, rep.Errors = reapRunDirs(runDir, rep.Errors)
	return rep, errors.Join(rep.Errors...)
}

// reapRunDirs removes run directories of kernels that are not alive.
func reapRunDirs(runDir string, errs []error) ([]string, []error) {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errs
		}
		return nil, append(errs, fmt.Errorf("read run dir: %w", err))
	}
	var removed []string
	for _, e := range ents {
		if !e.IsDir() || !validKernelID(e.Name()) || KernelAlive(runDir, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(runDir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove run dir %s: %w", e.Name(), err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errs
}

// RemoveOwn removes every container and volume this kernel instance
// created (by its kernel and owner labels), whatever the kernel still
// knows of them: a container whose wait failed when the engine stopped
// answering is forgotten by its runner but still runs once the engine is
// back. A kernel calls it as it exits; other kernels' resources are never
// touched.
func (c *Containers) RemoveOwn(ctx context.Context) error {
	l := c.cfg.Lease
	if l == nil || l.KernelID == "" || l.Owner == "" {
		return nil
	}
	sel := map[string]string{LabelManaged: "1", LabelKernel: l.KernelID, LabelOwner: l.Owner}
	var errs []error
	cs, err := c.cfg.Runtime.List(ctx, sel, true)
	if err != nil {
		return fmt.Errorf("list this kernel's sandboxes: %w", err)
	}
	for _, s := range cs {
		if err := c.cfg.Runtime.Remove(ctx, s.ID, true, true); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", s.Name, err))
		}
	}
	vs, err := c.cfg.Runtime.ListVolumes(ctx, sel)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list this kernel's volumes: %w", err))...)
	}
	for _, v := range vs {
		if err := c.cfg.Runtime.RemoveVolume(ctx, v.Name, true); err != nil {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}
