package conformance_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

// BenchmarkCoreToolRun is the performance target: a full core+tool
// run on tool-fs (L2 sandbox starts included when Docker is available) must
// finish in < 10 s. The baseline sub-benchmark is one bare plugin start and
// stop over go-plugin, measured in the same run, so the suite's cost can be
// read as a multiple of plugin starts.
func BenchmarkCoreToolRun(b *testing.B) {
	b.Run("baseline-one-start", func(b *testing.B) {
		env := plugintest.NewEnv(b, nil)
		for b.Loop() {
			bin := plugintest.StartTool(b, bins.toolFS, env)
			bin.Client.Kill()
		}
	})
	b.Run("core+tool", func(b *testing.B) {
		dir := builtin(b, bins.toolFS, "../builtin-plugins/tool-fs/plugin.yaml")
		o := options(b, 10*time.Second)
		var sandboxed bool
		for b.Loop() {
			rep, err := conformance.New(o).Run(context.Background(), dir, []string{"core", "tool"})
			if err != nil || !rep.Passed() {
				b.Fatalf("%v %v", err, rep.FailedMUST())
			}
			r, _ := rep.Result("CORE-SANDBOX-001")
			sandboxed = r.Status == conformance.Pass
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
		if sandboxed {
			b.ReportMetric(1, "sandboxed")
		}
	})
}
