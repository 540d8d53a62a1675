package conformance

import (
	"strings"
	"testing"
)

// The registry's record of a run says what the report says: the verdict,
// the summary, the failed and the skipped MUST items.
func TestCertificationAgreesWithReport(t *testing.T) {
	item := func(id string, l Level) Item {
		return Item{ID: id, Level: l, Profile: ProfileCore, Statement: "s", Source: "x"}
	}
	for _, c := range []struct {
		name    string
		results []Result
		passed  bool
	}{
		{"all pass", []Result{{Item: item("CORE-A", MUST), Status: Pass}}, true},
		{"skipped MUST", []Result{{Item: item("CORE-A", MUST), Status: Pass}, {Item: item("CORE-SANDBOX-001", MUST), Status: Skip}}, false},
		{"failed and skipped", []Result{{Item: item("CORE-A", MUST), Status: Fail}, {Item: item("CORE-B", MUST), Status: Skip}}, false},
		{"skipped SHOULD, n/a MUST", []Result{{Item: item("CORE-A", SHOULD), Status: Skip}, {Item: item("CORE-B", MUST), Status: NotApplicable}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{SuiteVersion: SuiteVersion, Plugin: "p", Profiles: []string{ProfileCore}, Results: c.results, Sandbox: "subprocess"}
			cert := Certification(r)
			if cert.Passed != c.passed || cert.Passed != r.Passed() || cert.Summary != r.Summary() || cert.SuiteVersion != SuiteVersion || cert.Sandbox != r.Sandbox {
				t.Fatalf("certification %+v disagrees with the report", cert)
			}
			if strings.Join(cert.Failed, ",") != strings.Join(r.FailedMUST(), ",") || strings.Join(cert.Skipped, ",") != strings.Join(r.SkippedMUST(), ",") {
				t.Fatalf("certification failed %v skipped %v, report %v %v", cert.Failed, cert.Skipped, r.FailedMUST(), r.SkippedMUST())
			}
		})
	}
}

// processFacts judges each promise of CORE-SANDBOX-001 from /proc.
func TestProcessFacts(t *testing.T) {
	const okStatus = "Name:\tp\nUid:\t65532\t65532\t65532\t65532\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
	const roRoot = "600 500 0:50 / / ro,relatime - overlay overlay rw\n601 600 0:51 / /tmp rw - tmpfs tmpfs rw\n"
	const loOnly = "Inter-|   Receive\n face |bytes\n    lo:       0       0\n"
	for _, c := range []struct {
		name, status, mounts, netdev string
		want                         string // substring of a problem; "" = none
	}{
		{"confined", okStatus, roRoot, loOnly, ""},
		{"root uid", strings.Replace(okStatus, "65532\t65532\t65532\t65532", "0\t0\t0\t0", 1), roRoot, loOnly, "uid 0"},
		{"a capability", strings.Replace(okStatus, "CapEff:\t0000000000000000", "CapEff:\t0000000000000400", 1), roRoot, loOnly, "CapEff"},
		{"bounding set", strings.Replace(okStatus, "CapBnd:\t0000000000000000", "CapBnd:\t00000000a80425fb", 1), roRoot, loOnly, "CapBnd"},
		{"new privileges", strings.Replace(okStatus, "NoNewPrivs:\t1", "NoNewPrivs:\t0", 1), roRoot, loOnly, "no_new_privs"},
		{"writable root", okStatus, strings.Replace(roRoot, " ro,relatime", " rw,relatime", 1), loOnly, "read-write"},
		{"network", okStatus, roRoot, loOnly + "  eth0:  1 2\n", "eth0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, problems := processFacts(c.status, c.mounts, c.netdev)
			got := strings.Join(problems, "; ")
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("problems %q, want %q", got, c.want)
			}
		})
	}
}
