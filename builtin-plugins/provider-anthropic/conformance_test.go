package main

import (
	"testing"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
)

// TestConformanceProviderProfile runs fluffy's conformance suite (core and
// provider profiles) on the built plugin against the suite's own fake
// upstream, reached only through the kernel's CONNECT proxy, with the
// sandbox items in its L2 container. The plugin must be certified: no MUST
// item failed or skipped.
func TestConformanceProviderProfile(t *testing.T) {
	rep := kerneltest.Conformance(t, "builtin-plugins/provider-anthropic", conformance.ProfileCore, conformance.ProfileProvider)
	if !rep.Passed() {
		t.Fatalf("not certified: %s", rep.Summary())
	}
	for _, id := range []string{"PROVIDER-STREAM-001", "PROVIDER-TOOLCALL-001", "PROVIDER-CANCEL-001", "PROVIDER-ERROR-001", "PROVIDER-PROXY-001", "CORE-SANDBOX-001", "CORE-SANDBOX-002"} {
		if r, ok := rep.Result(id); !ok || r.Status != conformance.Pass {
			t.Errorf("%s: %s %s", id, r.Status, r.Message)
		}
	}
}
