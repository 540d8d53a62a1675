package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
)

// Error codes callers branch on.
const (
	CodeNotFound         = "REGISTRY_NOT_FOUND"
	CodeDowngrade        = "REGISTRY_DOWNGRADE"
	CodeAlreadyInstalled = "REGISTRY_ALREADY_INSTALLED"
	CodeNotConfirmed     = "REGISTRY_NOT_CONFIRMED"
	CodeCertification    = "REGISTRY_CERTIFICATION_FAILED"
	CodeDisabled         = "REGISTRY_DISABLED"
	// CodeTampered: the stored plugin no longer matches the sha256 the
	// registry recorded when the user approved it.
	CodeTampered = "REGISTRY_PLUGIN_TAMPERED"
)

const (
	prefixPlugin   = "reg/plugin/"
	prefixRejected = "reg/rejected/"
)

// Auditor receives one event per registry change. host/audit implements it.
type Auditor interface {
	RecordPluginEvent(ctx context.Context, event string, rec Record, security bool) error
}

// Certifier runs the conformance suite on a candidate plugin before it is
// copied into the store.
type Certifier interface {
	Certify(ctx context.Context, m *manifests.Manifest) (Certification, error)
}

// Options configure a Registry.
type Options struct {
	// Home is $FLUFFY_HOME; plugins are stored under Home/plugins.
	Home    string
	Logger  hclog.Logger
	Auditor Auditor
	Now     func() time.Time
}

// DB is where the registry keeps its records: an open badger database, or
// a store.Shared one (the home database, opened per operation so that
// every kernel and the plugin CLI can use it at once). Each call is one
// transaction; nothing holds the database between calls.
type DB interface {
	View(fn func(*badger.Txn) error) error
	Update(fn func(*badger.Txn) error) error
	Sync() error
}

// Registry is the plugin catalogue. Its records live in db; the plugin
// files live under Home/plugins.
type Registry struct {
	db   DB
	opts Options
	log  hclog.Logger
}

// New returns a Registry over db.
func New(db DB, opts Options) *Registry {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{db: db, opts: opts, log: opts.Logger.Named("registry")}
}

// StoreDir is the root of the plugin store.
func (r *Registry) StoreDir() string { return filepath.Join(r.opts.Home, "plugins") }

func pluginKey(name, version string) []byte { return []byte(prefixPlugin + name + "/" + version) }

func rejectedKey(manifestPath string) []byte {
	h := sha256.Sum256([]byte(manifestPath))
	return []byte(prefixRejected + hex.EncodeToString(h[:8]))
}

func (r *Registry) put(key []byte, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := r.db.Update(func(txn *badger.Txn) error { return txn.Set(key, b) }); err != nil {
		return err
	}
	// Registry changes are rare and must survive a crash right after.
	return r.db.Sync()
}

func (r *Registry) scanPrefix(prefix string) ([]Record, error) {
	var out []Record
	err := r.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var rec Record
			if err := it.Item().Value(func(v []byte) error { return unmarshalRecord(v, &rec) }); err != nil {
				return fmt.Errorf("decode %s: %w", it.Item().Key(), err)
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// Filter selects records for List.
type Filter struct {
	Rejected bool   // only rejected manifests
	Name     string // only this plugin
	Kind     string
	Tag      string
}

// List returns installed plugins (or, with Filter.Rejected, rejected
// manifests), sorted by name then version.
func (r *Registry) List(f Filter) ([]Record, error) {
	prefix := prefixPlugin
	if f.Rejected {
		prefix = prefixRejected
	}
	recs, err := r.scanPrefix(prefix)
	if err != nil {
		return nil, fmt.Errorf("list plugins: %w", err)
	}
	recs = slices.DeleteFunc(recs, func(x Record) bool {
		return (f.Name != "" && x.Name != f.Name) || (f.Kind != "" && x.Kind != f.Kind) || (f.Tag != "" && !x.HasTag(f.Tag))
	})
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Name != recs[j].Name {
			return recs[i].Name < recs[j].Name
		}
		return lessVersion(recs[i].Version, recs[j].Version)
	})
	return recs, nil
}

func lessVersion(a, b string) bool {
	va, ea := semver.NewVersion(a)
	vb, eb := semver.NewVersion(b)
	if ea != nil || eb != nil {
		return a < b
	}
	return va.LessThan(vb)
}

// Versions returns every installed version of name, oldest first.
func (r *Registry) Versions(name string) ([]Record, error) {
	return r.List(Filter{Name: name})
}

// Get returns the version of name that would run: the newest builtin
// version if fluffy ships the plugin (a third-party record under a builtin
// name, left from before names were reserved, never replaces it), else the
// newest installed version. A disabled plugin is returned with State
// disabled.
func (r *Registry) Get(name string) (Record, error) {
	vs, err := r.Versions(name)
	if err != nil {
		return Record{}, err
	}
	if len(vs) == 0 {
		return Record{}, uerr.New(CodeNotFound, fmt.Sprintf("no plugin named %s is installed", name),
			"the registry has no record of it", "run `fluffy plugin list` to see installed plugins, or `fluffy plugin install PATH`")
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Builtin {
			return vs[i], nil
		}
	}
	return vs[len(vs)-1], nil
}

// Shadowed returns the versions of name that never run because a builtin
// plugin of that name exists (see Get).
func (r *Registry) Shadowed(name string) ([]Record, error) {
	vs, err := r.Versions(name)
	if err != nil || !slices.ContainsFunc(vs, func(x Record) bool { return x.Builtin }) {
		return nil, err
	}
	return slices.DeleteFunc(vs, func(x Record) bool { return x.Builtin }), nil
}

// Manifest loads the stored manifest of a record.
func (r *Registry) Manifest(rec Record) (*manifests.Manifest, error) {
	return manifests.Load(rec.ManifestPath)
}

// Runnable returns the supervisor spec of the active version of name,
// refusing disabled and rejected plugins. It re-validates the stored
// manifest, so a store edited behind fluffy's back is caught here.
func (r *Registry) Runnable(name string) (supervisor.Spec, error) {
	rec, err := r.Get(name)
	if err != nil {
		return supervisor.Spec{}, err
	}
	if rec.State == StateDisabled {
		return supervisor.Spec{}, uerr.New(CodeDisabled, fmt.Sprintf("plugin %s is disabled", name),
			"reason: "+rec.Reason, fmt.Sprintf("run `fluffy plugin enable %s` to use it again", name))
	}
	m, err := r.Manifest(rec)
	if err != nil {
		return supervisor.Spec{}, fmt.Errorf("load stored manifest of %s: %w", name, err)
	}
	if err := CheckSandbox(m); err != nil {
		return supervisor.Spec{}, err
	}
	if err := manifestMatches(rec, m); err != nil {
		return supervisor.Spec{}, err
	}
	spec := Spec(m)
	// The registry's hash is the authority: the supervisor runs only a
	// copy of the binary whose bytes hash to what was recorded at install.
	spec.SHA256 = rec.SHA256
	// The tags the kernel derives and the user granted, never the
	// manifest's own claims.
	spec.Tags = rec.effectiveTags()
	return spec, nil
}

// manifestMatches refuses a stored manifest whose sha256 is not the one
// recorded at install: someone re-stamped it (with a new binary beside it,
// most likely).
func manifestMatches(rec Record, m *manifests.Manifest) error {
	if strings.EqualFold(m.SHA256, rec.SHA256) {
		return nil
	}
	return uerr.New(CodeTampered, fmt.Sprintf("plugin %s@%s was changed after it was installed", rec.Name, rec.Version),
		fmt.Sprintf("its stored manifest %s says sha256 %s, but the registry recorded %s when it was approved; it will not run", m.Path, m.SHA256, rec.SHA256),
		fmt.Sprintf("find out what changed it, then reinstall it from a trusted source (`fluffy plugin install PATH --force`) or remove it (`fluffy plugin remove %s@%s`)", rec.Name, rec.Version))
}

// Integrity checks an installed version against what the registry
// recorded: its stored manifest's sha256 and the sha256 of its stored
// binary. nil means both still match rec.SHA256.
func (r *Registry) Integrity(rec Record) error {
	m, err := r.Manifest(rec)
	if err != nil {
		return err
	}
	if err := manifestMatches(rec, m); err != nil {
		return err
	}
	got, err := manifests.FileSHA256(m.EntryPath())
	if err != nil {
		return uerr.Wrap(err, CodeTampered, fmt.Sprintf("plugin %s@%s's binary cannot be read", rec.Name, rec.Version), err.Error(),
			"reinstall it with `fluffy plugin install PATH --force`")
	}
	if !strings.EqualFold(got, rec.SHA256) {
		return uerr.New(CodeTampered, fmt.Sprintf("plugin %s@%s was changed after it was installed", rec.Name, rec.Version),
			fmt.Sprintf("its stored binary %s hashes to %s, but the registry recorded %s when it was approved; it will not run", m.EntryPath(), got, rec.SHA256),
			fmt.Sprintf("find out what changed it, then reinstall it from a trusted source (`fluffy plugin install PATH --force`) or remove it (`fluffy plugin remove %s@%s`)", rec.Name, rec.Version))
	}
	return nil
}

func unmarshalRecord(v []byte, rec *Record) error {
	if err := json.Unmarshal(v, rec); err != nil {
		return err
	}
	rec.normalize()
	return nil
}

// SetState records a lifecycle transition of an installed version. A
// disabled plugin stays disabled: only Enable leaves that state, so a
// running instance stopping after `disable` cannot undo the user's choice.
func (r *Registry) SetState(ctx context.Context, name, version string, st State, reason string) error {
	switch st {
	case StateRegistered, StateRejected, StateDisabled:
	default:
		return fmt.Errorf("set state of %s@%s: %q is a per-kernel state, not one the shared registry records", name, version, st)
	}
	return r.update(ctx, name, version, func(rec *Record) {
		if rec.State == StateDisabled && st != StateDisabled {
			return
		}
		rec.State, rec.Reason = st, reason
	})
}

func (r *Registry) update(ctx context.Context, name, version string, f func(*Record)) error {
	key := pluginKey(name, version)
	var rec Record
	err := r.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return uerr.New(CodeNotFound, fmt.Sprintf("plugin %s@%s is not installed", name, version), "the registry has no record of that version", "run `fluffy plugin list`")
		}
		if err != nil {
			return err
		}
		if err := item.Value(func(v []byte) error { return unmarshalRecord(v, &rec) }); err != nil {
			return err
		}
		f(&rec)
		rec.UpdatedAt = r.opts.Now()
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return txn.Set(key, b)
	})
	if err != nil {
		return err
	}
	return r.db.Sync()
}

// Disable marks every version of name disabled, with a reason.
func (r *Registry) Disable(ctx context.Context, name, reason string) error {
	return r.setAll(ctx, name, "disable", func(rec *Record) { rec.State, rec.Reason = StateDisabled, reason })
}

// Enable returns every version of name to registered.
func (r *Registry) Enable(ctx context.Context, name string) error {
	return r.setAll(ctx, name, "enable", func(rec *Record) { rec.State, rec.Reason = StateRegistered, "" })
}

func (r *Registry) setAll(ctx context.Context, name, event string, f func(*Record)) error {
	vs, err := r.Versions(name)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return uerr.New(CodeNotFound, fmt.Sprintf("no plugin named %s is installed", name), "the registry has no record of it", "run `fluffy plugin list`")
	}
	for _, v := range vs {
		if err := r.update(ctx, v.Name, v.Version, f); err != nil {
			return err
		}
	}
	rec, _ := r.Get(name)
	r.audit(ctx, "plugin_"+event, rec, true)
	return nil
}

// Remove deletes version of name from the store (every version when
// version is empty).
func (r *Registry) Remove(ctx context.Context, name, version string) ([]Record, error) {
	vs, err := r.Versions(name)
	if err != nil {
		return nil, err
	}
	var removed []Record
	for _, v := range vs {
		if version != "" && v.Version != version {
			continue
		}
		if v.Dir != "" && strings.HasPrefix(v.Dir, r.StoreDir()+string(os.PathSeparator)) {
			if err := os.RemoveAll(v.Dir); err != nil {
				return removed, fmt.Errorf("remove %s: %w", v.Dir, err)
			}
		}
		if err := r.db.Update(func(txn *badger.Txn) error { return txn.Delete(pluginKey(v.Name, v.Version)) }); err != nil {
			return removed, err
		}
		removed = append(removed, v)
		r.audit(ctx, "plugin_remove", v, true)
	}
	if len(removed) == 0 {
		what := fmt.Sprintf("no plugin named %s is installed", name)
		if version != "" {
			what = fmt.Sprintf("plugin %s@%s is not installed", name, version)
		}
		return nil, uerr.New(CodeNotFound, what, "the registry has no record of it", "run `fluffy plugin list` to see installed versions")
	}
	// Drop the now-empty name directory.
	_ = os.Remove(filepath.Join(r.StoreDir(), name))
	return removed, nil
}

func (r *Registry) audit(ctx context.Context, event string, rec Record, security bool) {
	if r.opts.Auditor == nil {
		return
	}
	if err := r.opts.Auditor.RecordPluginEvent(ctx, event, rec, security); err != nil {
		r.log.Error("audit plugin event", "event", event, "plugin", rec.Name, "error", err)
	}
}

// reject records a manifest that failed on the way in.
func (r *Registry) reject(ctx context.Context, manifestPath string, m *manifests.Manifest, cause error) Record {
	ue := uerr.From(cause)
	rec := Record{State: StateRejected, ManifestPath: manifestPath, Reason: cause.Error(), ErrorCode: ue.Code, UpdatedAt: r.opts.Now(), InstalledAt: r.opts.Now()}
	if m != nil {
		rec.Name, rec.Version, rec.Kind, rec.RequestedTags, rec.APIVersions, rec.SHA256 = m.Name, m.Version, m.Kind, m.Tags, m.APIVersions, m.SHA256
	} else {
		rec.Name = filepath.Base(filepath.Dir(manifestPath))
	}
	if err := r.put(rejectedKey(manifestPath), rec); err != nil {
		r.log.Error("record rejected manifest", "path", manifestPath, "error", err)
	}
	r.audit(ctx, "plugin_rejected", rec, true)
	return rec
}

func (r *Registry) clearRejected(manifestPath string) {
	_ = r.db.Update(func(txn *badger.Txn) error { return txn.Delete(rejectedKey(manifestPath)) })
}

func recordFrom(m *manifests.Manifest, st State, now time.Time) Record {
	rec := Record{
		Name: m.Name, Version: m.Version, Kind: m.Kind, Description: m.Description, Author: m.Author,
		State: st, RequestedTags: slices.Clone(m.Tags), APIVersions: m.APIVersions, SHA256: m.SHA256,
		Dir: m.Dir, ManifestPath: m.Path, Capabilities: m.RequiredCapabilities, Template: m.Sandbox.Template,
		InstalledAt: now, UpdatedAt: now,
	}
	for _, t := range m.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	return rec
}

// copyFile copies src to dst with mode, fsyncing dst.
func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
