package kernel

import (
	"testing"

	"github.com/fluffy-waffle/fluffy/host/registry"
)

func TestCertSummarySaysWhatWasEstablished(t *testing.T) {
	cases := []struct {
		name string
		c    *registry.Certification
		want string
	}{
		{"none", nil, "none"},
		{"passed", &registry.Certification{Passed: true}, "passed"},
		{"a MUST failed", &registry.Certification{Failed: []string{"CORE-HANDSHAKE-001"}}, "failed"},
		{"a MUST failed, forced", &registry.Certification{Failed: []string{"CORE-HANDSHAKE-001"}, Forced: true}, "failed-forced"},
		{"MUSTs not checked", &registry.Certification{Skipped: []string{"CORE-SANDBOX-001"}}, "not-certified"},
		{"MUSTs not checked, forced", &registry.Certification{Skipped: []string{"CORE-SANDBOX-001"}, Forced: true}, "not-certified-forced"},
		{"failed and not checked", &registry.Certification{Failed: []string{"A"}, Skipped: []string{"B"}}, "failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := certSummary(c.c); got != c.want {
				t.Fatalf("certSummary = %q, want %q", got, c.want)
			}
		})
	}
}
