package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// InstallOptions control one install.
type InstallOptions struct {
	// Reinstall allows replacing the installed copy of the same version
	// (fluffy plugin dev), and nothing else Force allows: consent and a
	// passed certification are still required.
	Reinstall bool
	// Force allows a downgrade or a reinstall of the same version, and the
	// install of a plugin that failed certification (recorded as forced).
	Force bool
	// Confirm asks the user to approve a plugin that is not builtin, showing
	// exactly what is approved, and which of the tags it requests to grant.
	// Nil means there is no one to ask: the install is refused unless Yes
	// is set.
	Confirm func(c Consent) (Approval, error)
	// Yes approves without asking. It grants no tag: only Grant does.
	Yes bool
	// Grant lists tags the user grants on the command line (--grant).
	Grant []string
	// BuiltinDirs are fluffy's own plugin directories (bin/plugins beside
	// the binary, $FLUFFY_BUILTIN_PLUGINS). A plugin from there is builtin:
	// its manifest tags are honoured and it needs no approval. A plugin
	// from anywhere else is third_party, gets only the tags the user grants,
	// and may not take a builtin plugin's name.
	BuiltinDirs []string
	// Certifier, if set, runs the conformance suite before the copy.
	Certifier Certifier
	// Progress receives one line per step.
	Progress func(step string)
}

// Consent is what the user approves: everything the plugin will be allowed
// to be and do.
type Consent struct {
	Record Record
	// Limits are the sandbox limits it will run under (the template's,
	// lowered where the manifest asks); zero for template none.
	Limits  sandbox.Limits
	Network []string
	// Grantable lists the requested tags the user may grant (ask for each).
	Grantable []string
	Notes     []string
}

// Approval is the user's answer.
type Approval struct {
	Approved bool
	// Grant lists tags the user granted in answer to the question.
	Grant []string
}

// CodeReservedName: a third-party plugin takes the name of a builtin one.
const CodeReservedName = "REGISTRY_RESERVED_NAME"

// Install validates the plugin at src (a directory holding plugin.yaml, or
// the manifest itself), checks its binary's checksum and API range, asks
// for the user's approval when it is not builtin (before any of its code
// runs), certifies it (the Certifier runs it in its sandbox), and copies it
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
	if err := CheckSandbox(m); err != nil {
		r.reject(ctx, manifestPath, m, err)
		return Record{}, err
	}
	builtin := isBuiltin(m.Dir, o.BuiltinDirs)
	if !builtin && r.reservedName(m.Name, o.BuiltinDirs) {
		err := uerr.New(CodeReservedName, fmt.Sprintf("%s is the name of a plugin fluffy ships", m.Name),
			"builtin plugin names are reserved: a plugin from "+m.Dir+" may not take one, because it would stand in for fluffy's own "+m.Name,
			"rename the plugin (name: in plugin.yaml and its Info), e.g. \""+m.Name+"-custom\"")
		r.reject(ctx, manifestPath, m, err)
		return Record{}, err
	}
	for _, t := range o.Grant {
		if !Grantable(t) {
			return Record{}, uerr.New("USAGE", fmt.Sprintf("tag %q cannot be granted", t),
				"core_plugin and third_party follow from where a plugin comes from; other tags are lowercase words",
				"grant a tag such as trusted_write, or leave --grant out")
		}
	}
	rec := recordFrom(m, StateRegistered, r.opts.Now())
	rec.Source = abs
	rec.Builtin = builtin
	var notes []string
	var grantable []string
	if !builtin {
		for _, t := range m.Tags {
			if Grantable(t) && !slices.Contains(o.Grant, t) {
				grantable = append(grantable, t)
			}
		}
		if slices.Contains(m.Tags, TagCore) {
			notes = append(notes, "the manifest claims core_plugin, but the plugin does not come from fluffy's builtin plugins: it is treated as third-party")
		}
		rec.GrantedTags = slices.Clone(o.Grant)
	}
	rec.Tags = rec.effectiveTags()

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
		// A builtin that is only registered where fluffy ships it (a
		// kernel or the CLI scanned it) is not installed yet: installing
		// it copies and certifies it.
		inPlace := e.Builtin && !strings.HasPrefix(e.Dir, r.StoreDir()+string(os.PathSeparator))
		switch {
		case ev.Equal(m.SemVer) && !o.Force && !o.Reinstall && !inPlace:
			return Record{}, uerr.New(CodeAlreadyInstalled, fmt.Sprintf("%s@%s is already installed", m.Name, m.Version),
				"installing the same version again would replace the stored binary",
				"use --force to reinstall it, or bump the plugin's version")
		case ev.GreaterThan(m.SemVer) && !o.Force:
			return Record{}, uerr.New(CodeDowngrade, fmt.Sprintf("refusing to downgrade %s from %s to %s", m.Name, e.Version, m.Version),
				"a newer version is installed; downgrades can reintroduce fixed bugs",
				fmt.Sprintf("use --force to install %s anyway, or `fluffy plugin remove %s@%s` first", m.Version, m.Name, e.Version))
		}
	}

	// Consent comes first: nothing of a third-party plugin runs (not even
	// its certification) before the user approved exactly this binary.
	if !builtin {
		if o.Force && o.Certifier != nil {
			notes = append(notes, "--force: it is installed even if it fails certification (recorded as forced)")
		}
		if err := r.consent(o, m, src, &rec, grantable, notes); err != nil {
			return Record{}, err
		}
	}

	if o.Certifier != nil {
		step("running the conformance suite for kind " + m.Kind + " in the plugin's sandbox")
		cert, err := o.Certifier.Certify(ctx, m)
		if err != nil {
			return Record{}, fmt.Errorf("certify %s: %w", m.Name, err)
		}
		rec.AddCertification(cert)
		if !strings.EqualFold(cert.SHA256, rec.SHA256) {
			// The binary changed between consent and certification.
			err := uerr.New(CodeTampered, fmt.Sprintf("%s changed while it was being installed", m.Name),
				fmt.Sprintf("you approved sha256 %s, certification ran %s", rec.SHA256, cert.SHA256),
				"find out what is rewriting the plugin's files, then install it again")
			r.reject(ctx, manifestPath, m, err)
			return Record{}, err
		}
		if !cert.Passed {
			if !o.Force {
				err := uerr.New(CodeCertification, fmt.Sprintf("%s failed certification", m.Name),
					unmetWhy(cert),
					fmt.Sprintf("run `fluffy conformance run %s` for the full report; fix the plugin, or install with --force (needs review, recorded in the audit log)", src))
				r.reject(ctx, manifestPath, m, err)
				return Record{}, err
			}
			cert.Forced = true
			rec.Certifications = nil
			rec.AddCertification(cert)
			if builtin {
				// A builtin needs no approval, unless it failed certification.
				notes = append(notes, "certification FAILED ("+strings.Join(append(slices.Clone(cert.Failed), cert.Skipped...), ", ")+"); installing anyway because of --force")
				if err := r.consent(o, m, src, &rec, grantable, notes); err != nil {
					return Record{}, err
				}
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
	if !strings.EqualFold(stored.SHA256, rec.SHA256) {
		_ = os.RemoveAll(dest)
		return Record{}, uerr.New(CodeTampered, fmt.Sprintf("%s changed while it was being installed", m.Name),
			fmt.Sprintf("you approved sha256 %s, the copy made for the store is %s", rec.SHA256, stored.SHA256),
			"find out what is rewriting the plugin's files, then install it again")
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
	for _, t := range rec.GrantedTags {
		r.audit(ctx, "plugin_tag_grant", withReason(rec, "tag "+t+" granted by the user at install"), true)
	}
	return rec, nil
}

// consent asks the user to approve rec (Yes approves without asking) and
// adds the tags they grant in answer.
func (r *Registry) consent(o InstallOptions, m *manifests.Manifest, src string, rec *Record, grantable, notes []string) error {
	if o.Yes {
		return nil
	}
	if o.Confirm == nil {
		return uerr.New(CodeNotConfirmed, fmt.Sprintf("%s needs your approval: there is no terminal to ask; pass --yes to approve", m.Name),
			"stdin is not a terminal and --yes was not given; nothing of the plugin was run or installed",
			fmt.Sprintf("review the plugin (`fluffy plugin install %s` in a terminal shows what it asks for), then run `fluffy plugin install %s --yes`", src, src))
	}
	c := Consent{Record: *rec, Limits: Spec(m).Limits, Grantable: grantable, Notes: notes}
	if m.Provider != nil {
		c.Network = m.Provider.Network
	}
	ans, err := o.Confirm(c)
	if err != nil {
		return err
	}
	if !ans.Approved {
		return uerr.New(CodeNotConfirmed, fmt.Sprintf("installation of %s was declined", m.Name), "you answered no; nothing of the plugin was run", "nothing was installed")
	}
	for _, t := range ans.Grant {
		if Grantable(t) && !slices.Contains(rec.GrantedTags, t) {
			rec.GrantedTags = append(rec.GrantedTags, t)
		}
	}
	rec.Tags = rec.effectiveTags()
	return nil
}

func withReason(rec Record, reason string) Record {
	rec.Reason = reason
	return rec
}

// isBuiltin reports whether dir lies inside one of fluffy's builtin plugin
// directories.
func isBuiltin(dir string, builtin []string) bool {
	for _, b := range builtin {
		b, err := filepath.Abs(b)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(b, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// reservedName reports whether name belongs to a builtin plugin: one fluffy
// ships, or one found in a builtin directory.
func (r *Registry) reservedName(name string, builtinDirs []string) bool {
	// "kernel" names the kernel's own tools (plan.complete, ...) to the
	// router and the policy: no plugin may take it.
	if name == KernelName || slices.Contains(BuiltinNames(), name) {
		return true
	}
	for _, d := range builtinDirs {
		found := false
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || found {
				return filepath.SkipDir
			}
			if e.IsDir() {
				if rel, _ := filepath.Rel(d, p); strings.Count(rel, string(os.PathSeparator)) >= 3 {
					return filepath.SkipDir
				}
				return nil
			}
			if e.Name() == manifests.FileName {
				if m, err := manifests.Load(p); err == nil && m.Name == name {
					found = true
				}
			}
			return nil
		})
		if found {
			return true
		}
	}
	return false
}

// CheckSandbox checks a manifest's sandbox request against its template:
// the template must exist, its limits are ceilings, and the entry binary
// must be able to run in the empty sandbox image (checked at install, at
// scan and before every load, so a dynamically linked binary is named as
// such before any launch instead of failing inside the container).
func CheckSandbox(m *manifests.Manifest) error {
	if m.Sandbox.Template == "" || m.Sandbox.Template == manifests.TemplateNone {
		return nil
	}
	tpl, err := sandbox.LookupTemplate(m.Sandbox.Template)
	if err != nil {
		return err
	}
	if err := tpl.CheckCeiling(m.Name, manifestLimits(m)); err != nil {
		return err
	}
	return sandbox.CheckRunnable(m.Name, m.EntryPath())
}

func manifestLimits(m *manifests.Manifest) sandbox.Limits {
	return sandbox.Limits{MemoryBytes: m.Sandbox.MemoryBytes, CPUs: m.Sandbox.CPUs, Pids: m.Sandbox.Pids, Timeout: m.Sandbox.Timeout}
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
// the same trust rule as Install (a manifest's tags count only under
// builtinDirs; elsewhere only what the user granted), and
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
		var stamp string
		if err == nil {
			// A binary verified at an earlier scan, unchanged since
			// (same stamp), is not hashed again.
			known := ""
			if prev, gerr := r.get(m.Name, m.Version); gerr == nil && prev.Dir == m.Dir && strings.EqualFold(prev.SHA256, m.SHA256) {
				known = prev.EntryStamp
			}
			stamp, err = m.VerifyChecksumSince(known)
		}
		if err == nil {
			err = supervisor.CheckAPIVersions(m.Name, m.APIVersions)
		}
		if err == nil {
			err = CheckSandbox(m)
		}
		if err != nil {
			found = append(found, r.reject(ctx, p, m, err))
			return nil
		}
		rec := recordFrom(m, StateRegistered, r.opts.Now())
		rec.EntryStamp = stamp
		rec.Builtin = isBuiltin(m.Dir, builtinDirs)
		rec.Tags = rec.effectiveTags()
		prev, gerr := r.get(m.Name, m.Version)
		if gerr == nil && prev.Dir != rec.Dir && strings.HasPrefix(prev.Dir, r.StoreDir()+string(os.PathSeparator)) {
			found = append(found, prev) // the installed copy wins
			return nil
		}
		if gerr == nil && prev.SHA256 == rec.SHA256 {
			// Keep what the user decided (disabled) and when it arrived.
			rec.State, rec.Reason, rec.InstalledAt, rec.Certification, rec.Certifications, rec.GrantedTags = prev.State, prev.Reason, prev.InstalledAt, prev.Certification, prev.Certifications, prev.GrantedTags
			rec.Tags = rec.effectiveTags()
		}
		if gerr == nil && sameRecord(prev, rec) {
			// Nothing to record: a put syncs the database, and a kernel
			// start re-scans every builtin.
			r.clearRejected(p)
			found = append(found, prev)
			return nil
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

// SetCertification records a certification on an installed version (see
// Record.AddCertification: one verdict per suite version, profile set and
// sha256; a weaker run never replaces a stronger one).
func (r *Registry) SetCertification(ctx context.Context, name, version string, c Certification) error {
	return r.update(ctx, name, version, func(rec *Record) { rec.AddCertification(c) })
}

// unmetWhy says which MUST items keep a certification from passing.
func unmetWhy(c Certification) string {
	var parts []string
	if len(c.Failed) > 0 {
		parts = append(parts, "MUST items failed: "+strings.Join(c.Failed, ", "))
	}
	if len(c.Skipped) > 0 {
		parts = append(parts, "MUST items not checked: "+strings.Join(c.Skipped, ", "))
	}
	return strings.Join(parts, "; ") + " — " + c.Summary
}

// Grant gives tag to every installed version of name, on the user's word
// (`fluffy plugin grant`), and audits it. A builtin plugin needs no grants;
// core_plugin and third_party cannot be granted.
func (r *Registry) Grant(ctx context.Context, name, tag string) error {
	return r.changeGrant(ctx, name, tag, true)
}

// Revoke takes back a tag the user granted, and audits it.
func (r *Registry) Revoke(ctx context.Context, name, tag string) error {
	return r.changeGrant(ctx, name, tag, false)
}

func (r *Registry) changeGrant(ctx context.Context, name, tag string, grant bool) error {
	if !Grantable(tag) {
		return uerr.New("USAGE", fmt.Sprintf("tag %q cannot be granted or revoked", tag),
			"core_plugin and third_party follow from where a plugin comes from; other tags are lowercase words",
			"name a tag such as trusted_write")
	}
	vs, err := r.Versions(name)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return uerr.New(CodeNotFound, fmt.Sprintf("no plugin named %s is installed", name), "the registry has no record of it", "run `fluffy plugin list`")
	}
	for _, v := range vs {
		err := r.update(ctx, v.Name, v.Version, func(rec *Record) {
			rec.GrantedTags = slices.DeleteFunc(rec.GrantedTags, func(t string) bool { return t == tag })
			if grant {
				rec.GrantedTags = append(rec.GrantedTags, tag)
			}
			rec.Tags = rec.effectiveTags()
		})
		if err != nil {
			return err
		}
	}
	rec, err := r.Get(name)
	if err != nil {
		return err
	}
	event, why := "plugin_tag_grant", "tag "+tag+" granted by the user"
	if !grant {
		event, why = "plugin_tag_revoke", "tag "+tag+" revoked by the user"
	}
	r.audit(ctx, event, withReason(rec, why), true)
	return nil
}

// sameRecord reports whether a and b differ in nothing but UpdatedAt.
func sameRecord(a, b Record) bool {
	a.UpdatedAt = b.UpdatedAt
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
