package spec

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status is the outcome of one item.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	// Skip: the item applies to the plugin but was not checked (the
	// runtime it needs is missing, or an earlier item's failure blocks it).
	// A skipped MUST item means the plugin is not certified: nothing vouches
	// for that requirement.
	Skip Status = "skip"
	// NotApplicable: the item does not apply to this plugin by construction
	// (another kind, an API version it does not declare, a runtime adapter
	// that runs in a jail rather than an L2 container). It never affects the
	// verdict.
	NotApplicable Status = "n/a"
)

// Result is one item's outcome in one run.
type Result struct {
	Item
	Status Status `json:"status"`
	// Message says what was seen; for a failure, also what to fix.
	Message  string        `json:"message"`
	Duration time.Duration `json:"duration_ns"`
}

// Report is a whole run: machine-readable, and rendered as text or JUnit.
type Report struct {
	SuiteVersion string    `json:"suite_version"`
	Plugin       string    `json:"plugin"`
	Version      string    `json:"version"`
	Kind         string    `json:"kind"`
	Manifest     string    `json:"manifest"`
	SHA256       string    `json:"sha256"`
	Profiles     []string  `json:"profiles"`
	APIVersion   int       `json:"api_version,omitempty"` // negotiated with the full range
	Sandbox      string    `json:"sandbox"`               // launcher used: "subprocess" or "container"
	Started      time.Time `json:"started"`
	// Duration of the whole run.
	Duration time.Duration `json:"duration_ns"`
	Results  []Result      `json:"results"`
}

// Passed is true when every MUST item that applies passed: none failed and
// none was skipped. This one verdict drives the text summary, JUnit, the
// CLI's exit code and the registry's certification.
func (r *Report) Passed() bool { return len(r.FailedMUST()) == 0 && len(r.SkippedMUST()) == 0 }

// SkippedMUST lists the IDs of MUST items that apply but were not checked.
func (r *Report) SkippedMUST() []string {
	var out []string
	for _, x := range r.Results {
		if x.Status == Skip && x.Level == MUST {
			out = append(out, x.ID)
		}
	}
	return out
}

// Unmet lists the MUST items that keep the plugin from being certified:
// the failed ones, then the skipped ones.
func (r *Report) Unmet() []string { return append(r.FailedMUST(), r.SkippedMUST()...) }

// FailedMUST lists the IDs of failed MUST items.
func (r *Report) FailedMUST() []string {
	var out []string
	for _, x := range r.Results {
		if x.Status == Fail && x.Level == MUST {
			out = append(out, x.ID)
		}
	}
	return out
}

// Result returns the result for id.
func (r *Report) Result(id string) (Result, bool) {
	for _, x := range r.Results {
		if x.ID == id {
			return x, true
		}
	}
	return Result{}, false
}

// Counts returns how many items passed, failed and were skipped (items
// that do not apply are not counted).
func (r *Report) Counts() (pass, fail, skip int) {
	for _, x := range r.Results {
		switch x.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		case Skip:
			skip++
		}
	}
	return
}

// Summary is one line: the verdict and the counts.
func (r *Report) Summary() string {
	p, f, s := r.Counts()
	verdict := "PASSED"
	switch f, sk := r.FailedMUST(), r.SkippedMUST(); {
	case len(f) > 0 && len(sk) > 0:
		verdict = "FAILED (MUST: " + strings.Join(f, ", ") + "; MUST not checked: " + strings.Join(sk, ", ") + ")"
	case len(f) > 0:
		verdict = "FAILED (MUST: " + strings.Join(f, ", ") + ")"
	case len(sk) > 0:
		verdict = "NOT CERTIFIED (MUST not checked: " + strings.Join(sk, ", ") + ")"
	}
	na := 0
	for _, x := range r.Results {
		if x.Status == NotApplicable {
			na++
		}
	}
	out := fmt.Sprintf("%s: %d passed, %d failed, %d skipped", verdict, p, f, s)
	if na > 0 {
		out += fmt.Sprintf(", %d not applicable", na)
	}
	return out + " in " + r.Duration.Round(time.Millisecond).String()
}

// WriteText renders the report for a person.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "conformance suite %s — %s@%s (%s), profiles %s, sandbox %s\n", r.SuiteVersion, r.Plugin, r.Version, r.Kind, strings.Join(r.Profiles, "+"), r.Sandbox)
	for _, x := range r.Results {
		mark := map[Status]string{Pass: "PASS", Fail: "FAIL", Skip: "SKIP", NotApplicable: "N/A "}[x.Status]
		fmt.Fprintf(&b, "  %s  %-22s %-6s %s\n", mark, x.ID, x.Level, x.Statement)
		if x.Message != "" && x.Status != Pass {
			for _, l := range strings.Split(x.Message, "\n") {
				fmt.Fprintf(&b, "        %s\n", l)
			}
		}
	}
	fmt.Fprintln(&b, r.Summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes JUnit XML: one testsuite per profile, one testcase per
// item. A failed SHOULD is reported as a failure of type SHOULD so CI shows
// it, while the exit code only follows MUST items. A skipped MUST item is a
// failure of type "MUST not checked" (the plugin is not certified without
// it); a skipped SHOULD and an item that does not apply are <skipped/>.
func (r *Report) WriteJUnit(w io.Writer) error {
	var out junitSuites
	idx := map[string]int{}
	for _, x := range r.Results {
		i, ok := idx[x.Profile]
		if !ok {
			i = len(out.Suites)
			idx[x.Profile] = i
			out.Suites = append(out.Suites, junitSuite{Name: "fluffy-conformance." + x.Profile})
		}
		s := &out.Suites[i]
		c := junitCase{Name: x.ID + " " + x.Statement, Classname: r.Plugin + "." + x.Profile, Time: secs(x.Duration)}
		switch x.Status {
		case Fail:
			c.Failure = &junitMessage{Message: firstLine(x.Message), Type: string(x.Level), Body: x.Message}
			s.Failures++
		case Skip:
			if x.Level == MUST {
				msg := "MUST item not checked, so the plugin is not certified: " + x.Message
				c.Failure = &junitMessage{Message: firstLine(msg), Type: "MUST not checked", Body: msg}
				s.Failures++
				break
			}
			c.Skipped = &junitMessage{Message: x.Message}
			s.Skipped++
		case NotApplicable:
			c.Skipped = &junitMessage{Message: "not applicable: " + x.Message}
			s.Skipped++
		default:
			c.SystemOut = x.Message
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for i := range out.Suites {
		var d time.Duration
		for _, c := range r.Results {
			if c.Profile == strings.TrimPrefix(out.Suites[i].Name, "fluffy-conformance.") {
				d += c.Duration
			}
		}
		out.Suites[i].Time = secs(d)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
