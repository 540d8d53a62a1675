package conformance

import (
	"bytes"
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

// A skipped MUST item means "not certified", and the verdict, the text
// report, JUnit and the stored certification say the same; a skipped
// SHOULD and an item that does not apply change nothing.
func TestSkippedMUSTIsNotCertified(t *testing.T) {
	item := func(id string, l Level) Item {
		return Item{ID: id, Level: l, Profile: ProfileCore, Statement: "s", Source: "x"}
	}
	for _, c := range []struct {
		name      string
		results   []Result
		passed    bool
		verdict   string
		junitFail int
	}{
		{"all pass", []Result{{Item: item("CORE-A", MUST), Status: Pass}}, true, "PASSED", 0},
		{"skipped MUST", []Result{{Item: item("CORE-A", MUST), Status: Pass}, {Item: item("CORE-SANDBOX-001", MUST), Status: Skip, Message: "L2 sandbox runtime not available"}}, false, "NOT CERTIFIED (MUST not checked: CORE-SANDBOX-001)", 1},
		{"failed and skipped", []Result{{Item: item("CORE-A", MUST), Status: Fail}, {Item: item("CORE-B", MUST), Status: Skip}}, false, "FAILED (MUST: CORE-A; MUST not checked: CORE-B)", 2},
		{"skipped SHOULD, n/a MUST", []Result{{Item: item("CORE-A", SHOULD), Status: Skip}, {Item: item("CORE-B", MUST), Status: NotApplicable}}, true, "PASSED", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{SuiteVersion: SuiteVersion, Plugin: "p", Profiles: []string{ProfileCore}, Results: c.results}
			if r.Passed() != c.passed {
				t.Fatalf("Passed() = %v", r.Passed())
			}
			if !strings.HasPrefix(r.Summary(), c.verdict+":") {
				t.Fatalf("summary %q, want verdict %q", r.Summary(), c.verdict)
			}
			var txt bytes.Buffer
			_ = r.WriteText(&txt)
			if !strings.Contains(txt.String(), c.verdict) {
				t.Fatalf("text report lacks %q:\n%s", c.verdict, txt.String())
			}
			var x bytes.Buffer
			if err := r.WriteJUnit(&x); err != nil {
				t.Fatal(err)
			}
			var js struct {
				Suites []struct {
					Failures int `xml:"failures,attr"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(x.Bytes(), &js); err != nil || len(js.Suites) != 1 || js.Suites[0].Failures != c.junitFail {
				t.Fatalf("JUnit failures %+v (err %v), want %d:\n%s", js, err, c.junitFail, x.String())
			}
			cert := r.Certification()
			if cert.Passed != c.passed || cert.Summary != r.Summary() {
				t.Fatalf("certification %+v disagrees with the report", cert)
			}
			if len(cert.Skipped) != len(r.SkippedMUST()) {
				t.Fatalf("certification skipped %v, report %v", cert.Skipped, r.SkippedMUST())
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

// docs/conformance.md carries the catalogue as CatalogueMarkdown renders
// it: one source, so the doc cannot promise an item the suite lacks.
func TestCatalogueDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, MarkdownBegin), strings.Index(doc, MarkdownEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/conformance.md lacks the catalogue markers %q … %q", MarkdownBegin, MarkdownEnd)
	}
	if got := strings.TrimSpace(doc[i+len(MarkdownBegin) : j]); got != strings.TrimSpace(CatalogueMarkdown()) {
		t.Fatalf("docs/conformance.md's catalogue is out of date: regenerate it with `fluffy conformance list --markdown`\ngot:\n%s\nwant:\n%s", got, CatalogueMarkdown())
	}
	ids := 0
	for _, l := range strings.Split(doc[i:j], "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| ID ") {
			ids++
		}
	}
	if ids != len(Catalogue()) {
		t.Fatalf("the doc lists %d items, the catalogue has %d", ids, len(Catalogue()))
	}
}
