package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// InstallOptions control one install.
type InstallOptions struct {
	// Force allows a downgrade or a reinstall of the same version, and the
	// install of a plugin that failed certification (recorded as forced).
	Force bool
	// Confirm asks the user to approve a plugin that is not core. Nil means
	// there is no one to ask: the install is refused unless Yes is set.
	Confirm func(rec Record, notes []string) (bool, error)
	// Yes approves without asking.
	Yes bool
	// BuiltinDirs are directories whose plugins may keep the core_plugin tag:
	// the plugins shipped beside the fluffy binary. A plugin from anywhere
	// else that claims core_plugin loses the tag and gains third_party.
	BuiltinDirs []string
	// Certifier, if set, runs the conformance suite before the copy.
	Certifier Certifier
	// Progress receives one line per step.
	Progress func(step string)
}

// Install validates the plugin at src (a directory holding plugin.yaml, or
// the manifest itself), checks its binary's checksum and API range,
// certifies it, asks for confirmation when it is not core, and copies it
// into the store. A manifest that fails is recorded as rejected.
func (r *Registry) Install(ctx context.Context, src string, o InstallOptions) (Record, error) {
	step := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return Record{}, fmt.Errorf("install %s: %w", src, err)
	}
	manifestPath := abs
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		manifestPath = filepath.Join(abs, manifests.FileName)
	}
	step("validating " + manifestPath)
	m, err := manifests.Load(manifestPath)
	if err != nil {
		r.reject(ctx, manifestPath, nil, err)
		return Record{}, err
	}
	step("checking the sha256 of " + m.Entry)
	if err := m.VerifyChecksum(); err != nil {
		r.reject(ctx, manifestPath, m, err)
		return Record{}, err
	}
	if err := supervisor.CheckAPIVersions(m.Name, m.APIVersions); err != nil {
		r.reject(ctx, manifestPath, m, err)
		return Record{}, err
	}
	rec := recordFrom(m, StateRegistered, r.opts.Now())
	rec.Source = abs
	var notes []string
	if note := r.trustTags(&rec, m.Dir, o.BuiltinDirs); note != "" {
		notes = append(notes, note)
	}

	// Version rules: never silently downgrade or replace.
	existing, err := r.Versions(m.Name)
	if err != nil {
		return Record{}, err
	}
	for _, e := range existing {
		ev, perr := semver.NewVersion(e.Version)
		if perr != nil {
			continue
		}
		switch {
		case ev.Equal(m.SemVer) && !o.Force:
			return Record{}, uerr.New(CodeAlreadyInstalled, fmt.Sprintf("%s@%s is already installed", m.Name, m.Version),
				"installing the same version again would replace the stored binary",
				"use --force to reinstall it, or bump the plugin's version")
		case ev.GreaterThan(m.SemVer) && !o.Force:
			return Record{}, uerr.New(CodeDowngrade, fmt.Sprintf("refusing to downgrade %s from %s to %s", m.Name, e.Version, m.Version),
				"a newer version is installed; downgrades can reintroduce fixed bugs",
				fmt.Sprintf("use --force to install %s anyway, or `fluffy plugin remove %s@%s` first", m.Version, m.Name, e.Version))
		}
	}

	if o.Certifier != nil {
		step("running the conformance suite for kind " + m.Kind)
		cert, err := o.Certifier.Certify(ctx, m)
		if err != nil {
			return Record{}, fmt.Errorf("certify %s: %w", m.Name, err)
		}
		rec.Certification = &cert
		if !cert.Passed {
			if !o.Force {
				err := uerr.New(CodeCertification, fmt.Sprintf("%s failed certification", m.Name),
					"MUST items failed: "+strings.Join(cert.Failed, ", ")+" — "+cert.Summary,
					fmt.Sprintf("run `fluffy conformance run %s` for the full report; fix the plugin, or install with --force (needs review, recorded in the audit log)", src))
				r.reject(ctx, manifestPath, m, err)
				return Record{}, err
			}
			cert.Forced = true
			rec.Certification = &cert
			notes = append(notes, "certification FAILED ("+strings.Join(cert.Failed, ", ")+"); installing anyway because of --force")
		}
	}

	if !rec.HasTag(TagCore) || rec.Certification != nil && rec.Certification.Forced {
		ok := o.Yes
		if !ok {
			if o.Confirm == nil {
				return Record{}, uerr.New(CodeNotConfirmed, fmt.Sprintf("%s is a third-party plugin and needs your approval", m.Name),
					"there is no terminal to ask on and --yes was not given",
					fmt.Sprintf("review the plugin, then run `fluffy plugin install %s --yes`", src))
			}
			if ok, err = o.Confirm(rec, notes); err != nil {
				return Record{}, err
			}
			if !ok {
				return Record{}, uerr.New(CodeNotConfirmed, fmt.Sprintf("installation of %s was declined", m.Name), "you answered no", "nothing was installed")
			}
		}
	}

	step("copying into the plugin store")
	dest := filepath.Join(r.StoreDir(), m.Name, m.Version)
	if err := copyPlugin(m, dest); err != nil {
		return Record{}, err
	}
	stored, err := manifests.Load(filepath.Join(dest, manifests.FileName))
	if err != nil {
		return Record{}, fmt.Errorf("re-read stored manifest: %w", err)
	}
	if err := stored.VerifyChecksum(); err != nil {
		_ = os.RemoveAll(dest)
		return Record{}, fmt.Errorf("stored copy of %s: %w", m.Name, err)
	}
	rec.Dir, rec.ManifestPath = dest, stored.Path
	if err := r.put(pluginKey(m.Name, m.Version), rec); err != nil {
		return Record{}, fmt.Errorf("record %s: %w", m.Name, err)
	}
	r.clearRejected(manifestPath)
	event := "plugin_install"
	if rec.Certification != nil && rec.Certification.Forced {
		event = "plugin_install_forced"
	}
	r.audit(ctx, event, rec, true)
	return rec, nil
}

// trustTags applies the one trust rule for tags: core_plugin is honoured
// only for plugins that live in one of fluffy's builtin directories; any
// other plugin is third_party. It returns a note when it dropped a claim.
func (r *Registry) trustTags(rec *Record, dir string, builtin []string) string {
	note := ""
	if rec.HasTag(TagCore) && !r.isBuiltin(dir, builtin) {
		rec.Tags = slices.DeleteFunc(rec.Tags, func(t string) bool { return t == TagCore })
		note = "the manifest claims core_plugin, but the plugin does not come from fluffy's builtin plugins: it is treated as third-party"
	}
	if !rec.HasTag(TagCore) && !rec.HasTag(TagThirdParty) {
		rec.Tags = append(rec.Tags, TagThirdParty)
	}
	return note
}

func (r *Registry) isBuiltin(dir string, builtin []string) bool {
	for _, b := range builtin {
		b, err := filepath.Abs(b)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(b, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
}

// copyPlugin copies the manifest and entry binary into dest atomically: a
// temporary sibling directory renamed into place.
func copyPlugin(m *manifests.Manifest, dest string) error {
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, ".installing-")
	if err != nil {
		return fmt.Errorf("create staging dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	entryDst := filepath.Join(tmp, filepath.FromSlash(m.Entry))
	if err := os.MkdirAll(filepath.Dir(entryDst), 0o755); err != nil {
		return err
	}
	if err := copyFile(m.EntryPath(), entryDst, 0o755); err != nil {
		return fmt.Errorf("copy %s: %w", m.Entry, err)
	}
	if err := copyFile(m.Path, filepath.Join(tmp, manifests.FileName), 0o644); err != nil {
		return fmt.Errorf("copy manifest: %w", err)
	}
	if err := os.RemoveAll(dest); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("move into store: %w", err)
	}
	return nil
}

// Scan discovers plugin directories under dir (each holding plugin.yaml,
// at most three levels deep) and registers them in place: valid,
// compatible manifests become registered, the rest rejected. Tags follow
// the same trust rule as Install (core_plugin only under builtinDirs), and
// a version already installed into the store is left as installed. It
// returns what it found.
func (r *Registry) Scan(ctx context.Context, dir string, builtinDirs []string) ([]Record, error) {
	var found []Record
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, p); strings.Count(rel, string(os.PathSeparator)) >= 3 || strings.HasPrefix(d.Name(), ".installing-") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != manifests.FileName {
			return nil
		}
		m, err := manifests.Load(p)
		if err == nil {
			err = m.VerifyChecksum()
		}
		if err == nil {
			err = supervisor.CheckAPIVersions(m.Name, m.APIVersions)
		}
		if err != nil {
			found = append(found, r.reject(ctx, p, m, err))
			return nil
		}
		rec := recordFrom(m, StateRegistered, r.opts.Now())
		r.trustTags(&rec, m.Dir, builtinDirs)
		prev, gerr := r.get(m.Name, m.Version)
		if gerr == nil && prev.Dir != rec.Dir && strings.HasPrefix(prev.Dir, r.StoreDir()+string(os.PathSeparator)) {
			found = append(found, prev) // the installed copy wins
			return nil
		}
		if gerr == nil && prev.SHA256 == rec.SHA256 {
			// Keep what the user decided (disabled) and when it arrived.
			rec.State, rec.Reason, rec.InstalledAt, rec.Certification, rec.Tags = prev.State, prev.Reason, prev.InstalledAt, prev.Certification, prev.Tags
		}
		if err := r.put(pluginKey(m.Name, m.Version), rec); err != nil {
			return err
		}
		r.clearRejected(p)
		found = append(found, rec)
		return nil
	})
	if err != nil {
		return found, fmt.Errorf("scan %s: %w", dir, err)
	}
	return found, nil
}

func (r *Registry) get(name, version string) (Record, error) {
	vs, err := r.Versions(name)
	if err != nil {
		return Record{}, err
	}
	for _, v := range vs {
		if v.Version == version {
			return v, nil
		}
	}
	return Record{}, uerr.New(CodeNotFound, name+"@"+version+" is not installed", "", "")
}

// SetCertification stores a certification on an installed version.
func (r *Registry) SetCertification(ctx context.Context, name, version string, c Certification) error {
	return r.update(ctx, name, version, func(rec *Record) { rec.Certification = &c })
}
