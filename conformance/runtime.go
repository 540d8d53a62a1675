package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// The limits every runtime-profile container is created with. Small, page
// aligned and unlike any engine default, so "ignored" cannot pass by luck.
const (
	rtMemory = 48 << 20
	rtPids   = 24
	// rtStopTimeout is the grace of Stop; the idle process exits on SIGTERM.
	rtStopTimeout = 3 * time.Second
	// rtGuestStub is where the idle binary is mounted in the containers.
	rtGuestStub = "/plugin/fluffy-idle"
)

func runtimeChecks() map[string]checkFunc {
	return map[string]checkFunc{
		"RUNTIME-LIFECYCLE-001": runtimeItem(lifecycle),
		"RUNTIME-LIMITS-001":    runtimeItem(limits),
		"RUNTIME-LABELS-001":    runtimeItem(labelsCheck),
		"RUNTIME-CLEANUP-001":   runtimeItem(cleanupCheck),
	}
}

// adapterLauncher starts runtime adapters as the kernel does: in the
// AdapterJail, which sees only the adapter binary, its socket directory
// and the engine socket. The jail hashes the binary against LaunchSpec's
// sha256 before building its command, so go-plugin's SecureConfig (which
// could only hash bwrap itself) is dropped when the command is the jail.
type adapterLauncher struct{ jail *sandbox.AdapterJail }

func (a adapterLauncher) Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error) {
	l, err := a.jail.Prepare(ctx, spec, cfg)
	if err != nil {
		return l, err
	}
	if cfg.Cmd != nil && cfg.Cmd.Path != spec.Binary {
		cfg.SecureConfig = nil
	}
	return l, nil
}

var _ supervisor.Launcher = adapterLauncher{}

// setupRuntime prepares the adapter launcher (a private lease under a
// short run directory, removed on close) and the unique labels of the run.
func (p *probe) setupRuntime() error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	p.rts = &rtState{
		run:     run,
		kernel:  "conformance-" + run,
		session: "conformance-session-" + run,
	}
	if p.r.opts.AdapterLauncher != nil {
		p.adapterL = p.r.opts.AdapterLauncher
		return nil
	}
	runDir, err := os.MkdirTemp("", "fcr-")
	if err != nil {
		return err
	}
	lease, err := sandbox.AcquireLease(runDir, sandbox.NewKernelID())
	if err != nil {
		_ = os.RemoveAll(runDir)
		return err
	}
	p.onClose(func() { _ = lease.Release(); _ = os.RemoveAll(runDir) })
	p.adapterL = adapterLauncher{jail: &sandbox.AdapterJail{
		Lease: lease, EngineSocket: sandbox.EngineSocketFromEnv(os.Getenv), Logger: p.r.opts.Logger.Named("adapter-jail"),
		Require: os.Getenv(sandbox.EnvRequireJail) != "",
	}}
	return nil
}

// rtState is the runtime profile's shared state: the run's unique labels,
// the base image, the idle binary and the suite's own view of the engine
// (fluffy's builtin runtime-docker adapter, never the adapter under test:
// see engineView), which is also its safety net for cleanup.
type rtState struct {
	run, kernel, session string

	once     sync.Once
	skipMsg  string
	setupErr string
	image    string
	stub     string   // host path of the idle binary
	stubArgs []string // arguments before "idle"
	engine   rt.Client

	mu      sync.Mutex
	ctrs    []string
	volumes []string
}

// rtClient runs f with the adapter's runtime client.
func (p *probe) rtClient(ctx context.Context, f func(ctx context.Context, c rt.Client) error) error {
	return p.use(ctx, func(ctx context.Context, raw any) error {
		c, ok := raw.(rt.Client)
		if !ok {
			return fmt.Errorf("the runtime shim returned %T", raw)
		}
		return f(ctx, c)
	})
}

// rtReady does the once-per-run preparation: the idle binary, the suite's
// own engine view and the base image (imported through the adapter's PrepareImage,
// as the kernel does).
func (p *probe) rtReady(ctx context.Context) (*rtState, outcome, bool) {
	if o, stop := p.blocked(); stop {
		return nil, o, true
	}
	s := p.rts
	s.once.Do(func() {
		if len(p.r.opts.StubKernel) == 0 {
			s.skipMsg = "no stub kernel command configured (Options.StubKernel): its binary is the process the runtime profile runs in its containers"
			return
		}
		s.stub, s.stubArgs = p.r.opts.StubKernel[0], p.r.opts.StubKernel[1:]
		if err := staticBinary(s.stub); err != nil {
			s.skipMsg = fmt.Sprintf("the stub kernel binary cannot run in the empty base image: %v (build it with CGO_ENABLED=0)", err)
			return
		}
		eng, skipMsg, err := p.engineView(ctx)
		switch {
		case err != nil:
			s.setupErr = fmt.Sprintf("the suite cannot reach the engine itself: %v", err)
			return
		case eng == nil:
			s.skipMsg = skipMsg
			return
		}
		s.engine = eng
		p.onClose(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s.cleanup(cctx)
		})
		err = p.rtClient(ctx, func(ctx context.Context, c rt.Client) error {
			ref, err := sandbox.EnsureBaseImage(ctx, c)
			s.image = ref
			return err
		})
		if err != nil {
			s.setupErr = fmt.Sprintf("PrepareImage of the L2 base image failed: %s\nfix: import the rootfs tar as an image named by ref (docker: ImageImport), and succeed without re-importing when the image exists", errText(err))
		}
	})
	switch {
	case s.skipMsg != "":
		return nil, skip("%s", s.skipMsg), true
	case s.setupErr != "":
		return nil, fail("%s", s.setupErr), true
	}
	return s, outcome{}, false
}

// staticBinary refuses an ELF with a dynamic loader: the base image holds
// no libc.
func staticBinary(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, pr := range f.Progs {
		if pr.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", filepath.Base(path))
		}
	}
	return nil
}

func (s *rtState) labels(tag string) map[string]string {
	return map[string]string{
		sandbox.LabelManaged:  "1",
		sandbox.LabelKernel:   s.kernel,
		sandbox.LabelSession:  s.session,
		sandbox.LabelPlugin:   "conformance",
		sandbox.LabelInstance: tag,
		sandbox.LabelTemplate: "conformance",
	}
}

// spec is the container the items create: the sandbox package's hard
// settings, small limits, no network, and the idle process.
func (s *rtState) spec(tag string) rt.Spec {
	return rt.Spec{
		Name:            "fluffy-conformance-" + s.run + "-" + tag,
		Image:           s.image,
		Cmd:             append(append([]string{rtGuestStub}, s.stubArgs...), idleArg),
		Env:             []string{"HOME=/tmp"},
		User:            fmt.Sprintf("%d:%d", sandbox.SandboxUID, sandbox.SandboxGID),
		WorkingDir:      "/tmp",
		Labels:          s.labels(tag),
		Mounts:          []rt.Mount{{Type: rt.MountBind, Source: s.stub, Target: rtGuestStub, ReadOnly: true}, {Type: rt.MountTmpfs, Target: "/tmp", TmpfsSize: 8 << 20, TmpfsMode: "1777"}},
		NetworkMode:     "none",
		MemoryBytes:     rtMemory,
		NanoCPUs:        500_000_000,
		PidsLimit:       rtPids,
		ReadOnlyRootfs:  true,
		NoNewPrivileges: true,
		CapDrop:         []string{"ALL"},
		LogMaxBytes:     1 << 20,
	}
}

// track remembers a container for the safety-net cleanup, with every
// volume the engine says it mounts.
func (s *rtState) track(ctx context.Context, id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	s.ctrs = append(s.ctrs, id)
	s.mu.Unlock()
	if st, found, err := s.engine.Inspect(ctx, id); err == nil && found {
		s.trackVolumes(volumesOf(st))
	}
}

func (s *rtState) trackVolumes(names []string) {
	s.mu.Lock()
	s.volumes = append(s.volumes, names...)
	s.mu.Unlock()
}

func volumesOf(st rt.State) []string {
	var out []string
	for _, m := range st.Config.Mounts {
		if m.Type == "volume" && m.Name != "" {
			out = append(out, m.Name)
		}
	}
	return out
}

// cleanup removes, through the engine directly (never trusting the adapter
// under test), every container and volume of the run: the tracked ones and
// anything carrying the run's kernel label.
func (s *rtState) cleanup(ctx context.Context) {
	if s.engine == nil {
		return
	}
	s.mu.Lock()
	ctrs, vols := s.ctrs, s.volumes
	s.ctrs, s.volumes = nil, nil
	s.mu.Unlock()
	mine := map[string]string{sandbox.LabelKernel: s.kernel}
	if cs, err := s.engine.List(ctx, mine, true); err == nil {
		for _, c := range cs {
			ctrs = append(ctrs, c.ID)
		}
	}
	for _, id := range ctrs {
		if st, found, err := s.engine.Inspect(ctx, id); err == nil && found {
			vols = append(vols, volumesOf(st)...)
		}
		_ = s.engine.Remove(ctx, id, true, true)
	}
	if vs, err := s.engine.ListVolumes(ctx, mine); err == nil {
		for _, v := range vs {
			vols = append(vols, v.Name)
		}
	}
	for _, v := range vols {
		_ = s.engine.RemoveVolume(ctx, v, true)
	}
}

// itemCleanup is deferred by every item: clean up even when it failed.
func (s *rtState) itemCleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.cleanup(ctx)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// sameID compares engine IDs that may be abbreviated.
func sameID(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// ---- RUNTIME-LIFECYCLE-001 ----

// lifecycle creates a container twice under one name (one
// container may result), and starts, stops and removes it twice each. The
// runtime contract has no typed not-found error (only Inspect reports
// absence, as found=false), so every second call must succeed.
func lifecycle(ctx context.Context, s *rtState, c rt.Client) outcome {
	const tag = "lifecycle"
	spec := s.spec(tag)
	id, err := c.Create(ctx, spec)
	s.track(ctx, id)
	if err != nil {
		return fail("Create failed: %s", errText(err))
	}
	id2, err2 := c.Create(ctx, spec)
	s.track(ctx, id2)
	list, err := c.List(ctx, map[string]string{sandbox.LabelKernel: s.kernel, sandbox.LabelInstance: tag}, true)
	if err != nil {
		return fail("List after Create failed: %s", errText(err))
	}
	if len(list) > 1 || (err2 == nil && !sameID(id, id2)) {
		return fail("a second Create with the same spec and name made a second container (%s, then %s); Create must not duplicate a container\nfix: create under exactly Spec.Name (the engine refuses a taken name)", shortID(id), shortID(id2))
	}
	steps := []struct {
		what string
		call func() error
		fix  string
	}{
		{"Start", func() error { return c.Start(ctx, id) }, "starting a running container must succeed (docker answers 304 Not Modified, which is not an error)"},
		{"Stop", func() error { return c.Stop(ctx, id, rtStopTimeout) }, "stopping a stopped container must succeed (304 Not Modified, or not-found, is success)"},
		{"Remove", func() error { return c.Remove(ctx, id, true, true) }, "removing a removed container must succeed: treat the engine's \"no such container\" as success; the kernel's cleanup and reaper retry removes and the contract has no not-found error"},
	}
	var log []string
	for _, st := range steps {
		if err := st.call(); err != nil {
			return fail("the first %s of container %s failed: %s", st.what, shortID(id), errText(err))
		}
		if err := st.call(); err != nil {
			return fail("the second %s of container %s failed: %s\nfix: %s", st.what, shortID(id), errText(err), st.fix)
		}
		state, found, err := c.Inspect(ctx, id)
		if err != nil {
			return fail("Inspect after %s failed: %s", st.what, errText(err))
		}
		switch st.what {
		case "Start":
			if !found || !state.Running {
				// It may have exited at once; the engine's view says why.
				return fail("after Start the container is not running (found=%v, status %q, exit %d, error %q)\nfix: Start must start the created container", found, state.Status, state.ExitCode, state.Error)
			}
		case "Stop":
			if !found || state.Running {
				return fail("after Stop the container is still running (found=%v, status %q)\nfix: Stop must stop the container within its timeout, then kill it", found, state.Status)
			}
		case "Remove":
			if found {
				return fail("after Remove, Inspect still finds the container (status %q)\nfix: Remove must delete it; Inspect must report found=false for an unknown container", state.Status)
			}
		}
		log = append(log, st.what+"×2")
	}
	dup := "second Create refused"
	if err2 == nil {
		dup = "second Create returned the same container"
	}
	return pass("%s; %s", dup, strings.Join(log, ", "))
}

// runtimeItem wraps one runtime check: it needs a ready runtime (or says
// why not), always cleans up what the item created, and reports a failing
// client as a failure of the item.
func runtimeItem(check func(context.Context, *rtState, rt.Client) outcome) func(context.Context, *probe) outcome {
	return func(ctx context.Context, p *probe) outcome {
		s, o, stop := p.rtReady(ctx)
		if stop {
			return o
		}
		defer s.itemCleanup()
		var res outcome
		err := p.rtClient(ctx, func(ctx context.Context, c rt.Client) error {
			res = check(ctx, s, c)
			return nil
		})
		if err != nil {
			return fail("the runtime client failed: %s", errText(err))
		}
		return res
	}
}

// ---- RUNTIME-LIMITS-001 ----

func limits(ctx context.Context, s *rtState, c rt.Client) outcome {
	id, err := c.Create(ctx, s.spec("limits"))
	s.track(ctx, id)
	if err != nil {
		return fail("Create failed: %s", errText(err))
	}
	hc, err := s.recorded(ctx, id)
	if err != nil {
		return fail("%v", err)
	}
	var probs []string
	if hc.MemoryBytes != rtMemory {
		probs = append(probs, fmt.Sprintf("memory limit is %d, the spec asked %d: set HostConfig.Memory from Spec.MemoryBytes", hc.MemoryBytes, int64(rtMemory)))
	}
	if hc.PidsLimit != rtPids {
		got := "none"
		if hc.PidsLimit != 0 {
			got = strconv.FormatInt(hc.PidsLimit, 10)
		}
		probs = append(probs, fmt.Sprintf("pids limit is %s, the spec asked %d: set HostConfig.PidsLimit from Spec.PidsLimit", got, rtPids))
	}
	if hc.NetworkMode != "none" {
		probs = append(probs, fmt.Sprintf("network mode is %q, the spec asked \"none\": set HostConfig.NetworkMode from Spec.NetworkMode", hc.NetworkMode))
	}
	if !hc.ReadOnlyRootfs {
		probs = append(probs, "the root filesystem is writable, the spec asked read-only: set HostConfig.ReadonlyRootfs")
	}
	if !slices.ContainsFunc(hc.CapDrop, func(c string) bool { return strings.EqualFold(c, "ALL") }) {
		probs = append(probs, fmt.Sprintf("capabilities dropped are %v, the spec asked ALL: set HostConfig.CapDrop", hc.CapDrop))
	}
	if !slices.ContainsFunc(hc.SecurityOpt, func(o string) bool { return strings.HasPrefix(o, "no-new-privileges") }) {
		probs = append(probs, "no-new-privileges is not set: add \"no-new-privileges:true\" to HostConfig.SecurityOpt")
	}
	if len(probs) > 0 {
		return fail("the engine's view of the created container does not apply the spec:\n- %s", strings.Join(probs, "\n- "))
	}
	if err := c.Start(ctx, id); err != nil {
		return fail("Start failed: %s", errText(err))
	}
	seen, out, err := idleReport(ctx, s, id)
	if err != nil {
		return fail("the container's process did not report its limits: %v (output %q)", err, textsafe.Cap(out, 300))
	}
	if seen["ifaces"] != "lo" {
		probs = append(probs, fmt.Sprintf("inside the container the interfaces are %q, with network none only lo may exist", seen["ifaces"]))
	}
	if m := seen["memory"]; m != "unknown" && m != strconv.Itoa(rtMemory) {
		probs = append(probs, fmt.Sprintf("inside the container the cgroup memory limit is %s, not %d", m, rtMemory))
	}
	if n := seen["pids"]; n != "unknown" && n != strconv.Itoa(rtPids) {
		probs = append(probs, fmt.Sprintf("inside the container the cgroup pids limit is %s, not %d", n, rtPids))
	}
	if len(probs) > 0 {
		return fail("the limits are not enforced:\n- %s\nfix: apply Spec.MemoryBytes, Spec.PidsLimit and Spec.NetworkMode to the container", strings.Join(probs, "\n- "))
	}
	if err := c.Stop(ctx, id, rtStopTimeout); err != nil {
		return fail("Stop failed: %s", errText(err))
	}
	return pass("engine: memory %d, pids %d, network none, read-only root, cap-drop ALL, no-new-privileges; inside: memory %s, pids %s, interfaces %s",
		hc.MemoryBytes, hc.PidsLimit, seen["memory"], seen["pids"], seen["ifaces"])
}

// idleReport reads the idle process's line from the engine's log of the
// container (through the suite's own engine view, not the adapter under
// test).
func idleReport(ctx context.Context, s *rtState, id string) (map[string]string, string, error) {
	deadline := time.Now().Add(8 * time.Second)
	var out string
	for {
		var o, e bytes.Buffer
		err := s.engine.Logs(ctx, id, false, 0, func(st rt.Stream, b []byte) error {
			if st == rt.Stderr {
				e.Write(b)
			} else {
				o.Write(b)
			}
			return nil
		})
		if err == nil {
			out = o.String() + e.String()
			if m, ok := parseIdle(out); ok {
				return m, out, nil
			}
		}
		if time.Now().After(deadline) {
			if st, found, err := s.engine.Inspect(ctx, id); err == nil && found && !st.Running {
				return nil, out, fmt.Errorf("the container exited (code %d, %s)", st.ExitCode, st.Error)
			}
			return nil, out, errors.New("no report within 8 s")
		}
		select {
		case <-ctx.Done():
			return nil, out, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ---- RUNTIME-LABELS-001 ----

// missingLabels lists every wanted label that got is missing or changed.
func missingLabels(want, got map[string]string) []string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s missing", k))
		} else if g != v {
			out = append(out, fmt.Sprintf("%s=%q, want %q", k, g, v))
		}
	}
	sort.Strings(out)
	return out
}

func labelsCheck(ctx context.Context, s *rtState, c rt.Client) outcome {
	const tag = "labels"
	want := s.labels(tag)
	id, err := c.Create(ctx, s.spec(tag))
	s.track(ctx, id)
	if err != nil {
		return fail("Create failed: %s", errText(err))
	}
	const fix = "fix: pass Spec.Labels to the engine unchanged (docker: container.Config.Labels); the kernel's reaper finds leaked containers by them"
	eng, found, err := s.engine.Inspect(ctx, id)
	if err != nil || !found {
		return fail("the engine does not know the created container %s (found=%v): %v", shortID(id), found, err)
	}
	if miss := missingLabels(want, eng.Labels); len(miss) > 0 {
		return fail("the engine's container lacks the spec's labels: %s\n%s", strings.Join(miss, ", "), fix)
	}
	st, found, err := c.Inspect(ctx, id)
	if err != nil || !found {
		return fail("Inspect of the created container failed (found=%v): %s", found, errText(err))
	}
	if miss := missingLabels(want, st.Labels); len(miss) > 0 {
		return fail("Inspect reports labels that differ from the spec's: %s\nfix: report the engine's labels in State.Labels", strings.Join(miss, ", "))
	}
	sel := map[string]string{sandbox.LabelKernel: s.kernel, sandbox.LabelSession: s.session}
	list, err := c.List(ctx, sel, true)
	if err != nil {
		return fail("List by the kernel and session labels failed: %s", errText(err))
	}
	if len(list) != 1 || !sameID(list[0].ID, id) {
		var ids []string
		for _, x := range list {
			ids = append(ids, shortID(x.ID))
		}
		return fail("List by the kernel and session labels returned %v, want exactly the created container %s\n%s; List must filter by every label given", ids, shortID(id), fix)
	}
	if miss := missingLabels(want, list[0].Labels); len(miss) > 0 {
		return fail("List reports labels that differ from the spec's: %s\nfix: report the engine's labels in State.Labels", strings.Join(miss, ", "))
	}
	other, err := c.List(ctx, map[string]string{sandbox.LabelKernel: s.kernel + "-other"}, true)
	if err != nil {
		return fail("List by another kernel's label failed: %s", errText(err))
	}
	if len(other) != 0 {
		return fail("List by another kernel's label returned %d containers, including this run's; List must filter by label value, not only by key", len(other))
	}
	if err := c.Remove(ctx, id, true, true); err != nil {
		return fail("Remove failed: %s", errText(err))
	}
	return pass("%s and %s on the engine's container, in Inspect and in List; List selects by them exactly", sandbox.LabelKernel, sandbox.LabelSession)
}

// ---- RUNTIME-CLEANUP-001 ----

func cleanupCheck(ctx context.Context, s *rtState, c rt.Client) outcome {
	const tag = "cleanup"
	labels := s.labels(tag)
	volName := "fluffy-conformance-" + s.run + "-vol"
	s.trackVolumes([]string{volName})
	if _, err := c.CreateVolume(ctx, volName, labels); err != nil {
		return fail("CreateVolume failed: %s", errText(err))
	}
	spec := s.spec(tag)
	spec.Mounts = append(spec.Mounts, rt.Mount{Type: rt.MountVolume, Source: volName, Target: "/data"})
	id, err := c.Create(ctx, spec)
	s.track(ctx, id)
	if err != nil {
		return fail("Create failed: %s", errText(err))
	}
	eng, found, err := s.engine.Inspect(ctx, id)
	if err != nil || !found {
		return fail("the engine does not know the created container %s (found=%v): %v", shortID(id), found, err)
	}
	vols := volumesOf(eng)
	if err := c.Start(ctx, id); err != nil {
		return fail("Start failed: %s", errText(err))
	}
	if err := c.Remove(ctx, id, true, true); err != nil {
		return fail("Remove(force, volumes) failed: %s", errText(err))
	}
	if err := c.RemoveVolume(ctx, volName, false); err != nil {
		return fail("RemoveVolume of the unused volume %s failed: %s", volName, errText(err))
	}
	var left []string
	if _, found, err := s.engine.Inspect(ctx, id); err == nil && found {
		left = append(left, "container "+shortID(id)+" (engine)")
	}
	if _, found, err := c.Inspect(ctx, id); err != nil || found {
		left = append(left, fmt.Sprintf("container %s (adapter Inspect found=%v err=%v)", shortID(id), found, err))
	}
	sel := map[string]string{sandbox.LabelKernel: s.kernel, sandbox.LabelInstance: tag}
	if cs, err := c.List(ctx, sel, true); err != nil || len(cs) > 0 {
		left = append(left, fmt.Sprintf("%d containers in List by the labels (err %v)", len(cs), err))
	}
	if cs, err := s.engine.List(ctx, sel, true); err == nil && len(cs) > 0 {
		left = append(left, fmt.Sprintf("%d labelled containers (engine)", len(cs)))
	}
	if vs, err := c.ListVolumes(ctx, sel); err != nil || len(vs) > 0 {
		left = append(left, fmt.Sprintf("%d volumes in ListVolumes by the labels (err %v)", len(vs), err))
	}
	exists := map[string]bool{}
	if all, err := s.engine.ListVolumes(ctx, nil); err == nil {
		for _, v := range all {
			exists[v.Name] = true
		}
	}
	for _, v := range vols {
		if exists[v] {
			what := "volume " + shortID(v) + " that the container mounted"
			if v != volName {
				what = "volume " + shortID(v) + " that the adapter added to the container (not in the spec)"
			}
			left = append(left, what)
		}
	}
	if len(left) > 0 {
		return fail("after Remove(force, volumes) and RemoveVolume these are left:\n- %s\nfix: Remove must delete the container and, when asked, its anonymous volumes (docker: RemoveOptions.RemoveVolumes); create nothing the spec does not name", strings.Join(left, "\n- "))
	}
	return pass("container, its %d volume(s) and every labelled object gone after Remove and RemoveVolume", len(vols))
}

// recorded is the engine's record of how container id was created.
func (s *rtState) recorded(ctx context.Context, id string) (rt.Config, error) {
	st, found, err := s.engine.Inspect(ctx, id)
	if err != nil || !found {
		return rt.Config{}, fmt.Errorf("the engine does not know the created container %s (found=%v): %v", shortID(id), found, err)
	}
	return st.Config, nil
}
