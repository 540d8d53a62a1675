package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
)

func coreChecks() map[string]checkFunc {
	return map[string]checkFunc{
		"CORE-MANIFEST-001":  checkManifestValid,
		"CORE-MANIFEST-002":  checkChecksum,
		"CORE-MANIFEST-003":  checkAPIRange,
		"CORE-HANDSHAKE-001": checkHandshake,
		"CORE-HANDSHAKE-002": checkNoCookie,
		"CORE-HANDSHAKE-003": checkNegotiates,
		"CORE-HANDSHAKE-004": checkEachVersion,
		"CORE-HANDSHAKE-005": checkOutsideRange,
		"CORE-INFO-001":      checkInfo,
		"CORE-START-001":     checkStartTime,
		"CORE-STDOUT-001":    checkStdout,
		"CORE-LOG-001":       checkLogs,
		"CORE-HEALTH-001":    checkHealth,
		"CORE-SHUTDOWN-001":  checkShutdownAsked,
		"CORE-SHUTDOWN-002":  checkShutdownOrphaned,
		"CORE-SANDBOX-001":   checkSandboxStarts,
		"CORE-SANDBOX-002":   checkSandboxWorks,
	}
}

// preLaunch reports whether the binary may be executed at all: never when
// the manifest is unusable or the checksum does not match.
func (p *probe) preLaunch() (outcome, bool) {
	if p.m == nil {
		return skip("the manifest is unusable (see CORE-MANIFEST-001)"), true
	}
	if p.sumErr != nil {
		return skip("the binary does not match its checksum and was not executed (see CORE-MANIFEST-002)"), true
	}
	if err := supervisor.CheckAPIVersions(p.m.Name, p.m.APIVersions); err != nil {
		return skip("no API version in common with the kernel (see CORE-MANIFEST-003)"), true
	}
	return outcome{}, false
}

func checkManifestValid(_ context.Context, p *probe) outcome {
	if p.loadErr != nil {
		return fail("%s", uerr.From(p.loadErr).Render())
	}
	return pass("%s@%s, kind %s", p.m.Name, p.m.Version, p.m.Kind)
}

func checkChecksum(_ context.Context, p *probe) outcome {
	if p.m == nil {
		return skip("the manifest is unusable (see CORE-MANIFEST-001)")
	}
	if p.sumErr != nil {
		return fail("%s", uerr.From(p.sumErr).Render())
	}
	return pass("sha256 %s", p.m.SHA256)
}

func checkAPIRange(_ context.Context, p *probe) outcome {
	if p.m == nil {
		return skip("the manifest is unusable (see CORE-MANIFEST-001)")
	}
	if err := supervisor.CheckAPIVersions(p.m.Name, p.m.APIVersions); err != nil {
		return fail("%s", uerr.From(err).Render())
	}
	return pass("declares %v; kernel supports [%d,%d]", p.m.APIVersions, base.APIVersionMin, base.APIVersionMax)
}

// startCodes maps a start failure's code to the item it fails; any other
// code fails CORE-HANDSHAKE-001.
var startCodeItem = map[string]string{
	supervisor.CodeAPIVersion:       "CORE-HANDSHAKE-003",
	supervisor.CodeInfoMismatch:     "CORE-INFO-001",
	supervisor.CodeStartTimeout:     "CORE-START-001",
	supervisor.CodeHandshakeGarbled: "CORE-STDOUT-001",
}

// startOutcome judges item id by the first start: fail when the start
// error belongs to id, skip when it belongs to another item.
func startOutcome(p *probe, id string) (outcome, bool) {
	if o, stop := p.preLaunch(); stop {
		return o, true
	}
	err := p.ensureStarted()
	if err == nil {
		return outcome{}, false
	}
	code := uerr.From(err).Code
	owner, ok := startCodeItem[code]
	if !ok {
		owner = "CORE-HANDSHAKE-001"
	}
	if owner == id {
		return fail("%s", uerr.From(err).Render()), true
	}
	return skip("the plugin did not start (%s, see %s)", code, owner), true
}

func checkHandshake(_ context.Context, p *probe) outcome {
	if o, stop := startOutcome(p, "CORE-HANDSHAKE-001"); stop {
		return o
	}
	return pass("handshake completed; API v%d negotiated", p.negotiated)
}

var handshakeLine = regexp.MustCompile(`(?m)^\d+\|\d+\|(unix|tcp)\|`)

func checkNoCookie(ctx context.Context, p *probe) outcome {
	if o, stop := p.preLaunch(); stop {
		return o
	}
	if p.r.opts.Contained {
		return skip("not run: it executes the binary directly, outside its sandbox, and this certification runs the plugin only in its sandbox")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, p.m.EntryPath())
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.Dir = p.ws
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	switch {
	case cctx.Err() != nil:
		return fail("started without FLUFFY_PLUGIN set, the binary was still running after 5 s; it must exit at once (pluginsdk.Serve* does this)")
	case handshakeLine.Match(out.Bytes()):
		return fail("started without the magic cookie, the binary printed a handshake line %q; it must refuse to serve", firstLine(out.String()))
	case err == nil:
		return fail("started without the magic cookie, the binary exited 0; it must exit non-zero so a user who runs it by hand sees it is a plugin")
	}
	return pass("refused to run without the cookie (%v)", err)
}

func checkNegotiates(_ context.Context, p *probe) outcome {
	if o, stop := startOutcome(p, "CORE-HANDSHAKE-003"); stop {
		return o
	}
	if !slices.Contains(p.m.APIVersions, p.negotiated) {
		return fail("the plugin negotiated API v%d, which its manifest does not declare (%v); declare every version the binary serves", p.negotiated, p.m.APIVersions)
	}
	return pass("offered [%d,%d], negotiated v%d", base.APIVersionMin, base.APIVersionMax, p.negotiated)
}

// baseOf is the base part of every kind client.
type baseOf interface {
	Info(ctx context.Context) (base.Info, error)
	Health(ctx context.Context) error
}

func checkEachVersion(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	var problems, ok []string
	for _, v := range p.m.APIVersions {
		if v < base.APIVersionMin || v > base.APIVersionMax {
			// The kernel cannot speak it, but the manifest says the binary
			// does: the handshake tells whether that is true.
			if err := p.tryHandshake(ctx, v); err != nil {
				problems = append(problems, fmt.Sprintf("v%d: %s", v, err))
				continue
			}
			ok = append(ok, fmt.Sprintf("v%d (handshake only: this kernel speaks [%d,%d])", v, base.APIVersionMin, base.APIVersionMax))
			continue
		}
		if err := p.tryVersion(ctx, v); err != nil {
			problems = append(problems, fmt.Sprintf("v%d: %s", v, err))
			continue
		}
		ok = append(ok, fmt.Sprintf("v%d", v))
	}
	if len(problems) > 0 {
		return fail("the manifest declares API versions %v but the binary does not serve them all:\n%s\nfix: serve every declared version (pluginsdk.Serve* without WithAPIVersions serves all), or remove the missing ones from api_versions", p.m.APIVersions, strings.Join(problems, "\n"))
	}
	return pass("served %s", strings.Join(ok, ", "))
}

func (p *probe) tryVersion(ctx context.Context, v int) error {
	c, _, err := p.rawStart(ctx, p.launcher(), []int{v}, nil)
	if err != nil {
		return err
	}
	defer c.Kill()
	rpc, err := c.Client()
	if err != nil {
		return fmt.Errorf("handshake failed: %s", firstLine(err.Error()))
	}
	if got := c.NegotiatedVersion(); got != v {
		return fmt.Errorf("offered only v%d, the plugin answered v%d", v, got)
	}
	raw, err := rpc.Dispense(p.m.Kind)
	if err != nil {
		return fmt.Errorf("dispense: %v", err)
	}
	b, ok := raw.(baseOf)
	if !ok {
		return fmt.Errorf("no base client for kind %s", p.m.Kind)
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := b.Info(ictx)
	if err != nil {
		return fmt.Errorf("Info failed under v%d: %s (the binary does not serve this version's services)", v, firstLine(err.Error()))
	}
	if !info.Speaks(v) {
		return fmt.Errorf("served v%d but Info lists %v", v, info.APIVersions)
	}
	return nil
}

// tryHandshake offers only v, a version this kernel has no protocol for,
// and checks that the binary agrees to it.
func (p *probe) tryHandshake(ctx context.Context, v int) error {
	c, _, err := p.rawStart(ctx, p.launcher(), []int{v}, nil)
	if err != nil {
		return err
	}
	defer c.Kill()
	if _, err := c.Client(); err != nil {
		return fmt.Errorf("offered only v%d, the binary refused it: %s", v, firstLine(err.Error()))
	}
	if got := c.NegotiatedVersion(); got != v {
		return fmt.Errorf("offered only v%d, the plugin answered v%d", v, got)
	}
	return nil
}

// outsideVersion is an API version no kernel will ever speak.
const outsideVersion = 99

func checkOutsideRange(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	c, cap, err := p.rawStart(ctx, p.launcher(), []int{outsideVersion}, nil)
	if err != nil {
		return fail("could not launch: %v", err)
	}
	_, err = c.Client()
	if err == nil {
		c.Kill()
		return fail("offered only API v%d, the plugin completed a handshake (v%d); it must answer with a version it really serves so the kernel can refuse it", outsideVersion, c.NegotiatedVersion())
	}
	c.Kill()
	deadline := time.Now().Add(3 * time.Second)
	for !c.Exited() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stderr, _, _ := cap.snapshot()
	if i := strings.Index(stderr, "panic:"); i >= 0 {
		return fail("offered only API v%d, the plugin panicked: %s\nfix: leave version selection to go-plugin (pluginsdk.Serve*); do not read PLUGIN_PROTOCOL_VERSIONS yourself", outsideVersion, firstLine(stderr[i:]))
	}
	if !strings.Contains(strings.ToLower(err.Error()), "incompatible api version") {
		return fail("offered only API v%d, the start failed with %q instead of an incompatible-version handshake", outsideVersion, firstLine(err.Error()))
	}
	if !c.Exited() {
		return fail("offered only API v%d, the plugin was refused but did not exit within 3 s", outsideVersion)
	}
	return pass("refused with an incompatible-version handshake and exited")
}

func checkInfo(ctx context.Context, p *probe) outcome {
	if o, stop := startOutcome(p, "CORE-INFO-001"); stop {
		return o
	}
	var info base.Info
	err := p.use(ctx, func(ctx context.Context, raw any) error {
		var err error
		info, err = raw.(baseOf).Info(ctx)
		return err
	})
	if err != nil {
		return fail("Info failed: %s", errText(err))
	}
	var want []int
	for _, v := range p.m.APIVersions {
		if v >= base.APIVersionMin && v <= base.APIVersionMax {
			want = append(want, v)
		}
	}
	for _, v := range want {
		if !info.Speaks(v) {
			return fail("Info lists API versions %v but the manifest declares %v; keep them the same", info.APIVersions, p.m.APIVersions)
		}
	}
	return pass("name %s, kind %s, version %s, API %v", info.Name, info.Kind, info.Version, info.APIVersions)
}

func checkStartTime(_ context.Context, p *probe) outcome {
	if o, stop := startOutcome(p, "CORE-START-001"); stop {
		return o
	}
	return pass("ready in %s (limit %s)", p.startTook.Round(time.Millisecond), p.r.opts.StartTimeout)
}

// checkStdout runs late in the core profile so that everything the plugin
// printed so far (start, Info, health) has been captured.
func checkStdout(_ context.Context, p *probe) outcome {
	if o, stop := startOutcome(p, "CORE-STDOUT-001"); stop {
		return o
	}
	_, out, _ := p.cap.snapshot()
	if strings.TrimSpace(out) != "" {
		return fail("after the handshake the plugin wrote to stdout: %q\nfix: never print to stdout; log through pluginsdk.NewLogger (JSON on stderr)", textsafe.Cap(out, 200))
	}
	return pass("stdout carried only the handshake")
}

func checkLogs(ctx context.Context, p *probe) outcome {
	if o, stop := p.preLaunch(); stop {
		return o
	}
	if err := p.ensureStarted(); err != nil {
		return skip("the plugin did not start (%s)", uerr.From(err).Code)
	}
	// Health makes sure at least one round-trip happened while logging at trace.
	_ = p.use(ctx, func(ctx context.Context, raw any) error { return raw.(baseOf).Health(ctx) })
	stderr, _, syncErr := p.cap.snapshot()
	lines := 0
	for _, src := range []string{stderr, syncErr} {
		sc := bufio.NewScanner(strings.NewReader(src))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if l == "" {
				continue
			}
			lines++
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				return fail("stderr line is not JSON: %q\nfix: log through pluginsdk.NewLogger (hclog JSON) and never write to stderr directly", textsafe.Cap(l, 200))
			}
			for _, k := range []string{"@level", "@message", "@timestamp"} {
				if _, ok := rec[k]; !ok {
					return fail("stderr line lacks %s: %q\nfix: use hclog with JSONFormat (pluginsdk.NewLogger)", k, textsafe.Cap(l, 200))
				}
			}
		}
	}
	return pass("%d log lines, all hclog JSON", lines)
}

func checkHealth(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	t0 := time.Now()
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := p.use(hctx, func(ctx context.Context, raw any) error { return raw.(baseOf).Health(ctx) })
	if err != nil {
		return fail("Health failed after %s: %s", time.Since(t0).Round(time.Millisecond), errText(err))
	}
	return pass("healthy in %s", time.Since(t0).Round(time.Microsecond))
}

func checkShutdownAsked(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	c, _, err := p.rawStart(ctx, p.launcher(), base.SupportedAPIVersions(), nil)
	if err != nil {
		return fail("could not launch: %v", err)
	}
	defer c.Kill()
	rpc, err := c.Client()
	if err != nil {
		return fail("start: %v", err)
	}
	pid := c.ReattachConfig().Pid
	t0 := time.Now()
	// Close sends go-plugin's Controller.Shutdown, exactly what the kernel
	// does before it would resort to killing the process.
	_ = rpc.Close()
	deadline := t0.Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if c.Exited() || !processAlive(pid) {
			return pass("exited %s after the shutdown request", time.Since(t0).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fail("the plugin (pid %d) was still running 3 s after the shutdown request\nfix: return from main when pluginsdk.Serve* returns; do not block or start work after it", pid)
}

func checkShutdownOrphaned(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	if len(p.r.opts.StubKernel) == 0 && !p.r.opts.Contained {
		return skip("no stub kernel command configured (Options.StubKernel); the CLI and plugintest configure one")
	}
	return orphanCheck(ctx, p)
}

// sandboxStart starts the plugin under the L2 launcher, once.
func checkSandboxStarts(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	if p.m.Kind == manifests.KindRuntime {
		return na("runtime adapters run in a namespace jail, not an L2 container (DESIGN.md L2 sandboxes)")
	}
	if p.r.opts.Sandbox == nil {
		return skip("%s", p.r.opts.SandboxReason)
	}
	return sandboxStart(ctx, p)
}

func checkSandboxWorks(ctx context.Context, p *probe) outcome {
	if o, stop := p.blocked(); stop {
		return o
	}
	if p.m.Kind == manifests.KindRuntime {
		return na("runtime adapters run in a namespace jail, not an L2 container (DESIGN.md L2 sandboxes)")
	}
	if p.r.opts.Sandbox == nil {
		return skip("%s", p.r.opts.SandboxReason)
	}
	return sandboxSmoke(ctx, p)
}
