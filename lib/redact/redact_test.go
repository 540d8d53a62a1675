package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	r := New()
	cases := []struct {
		name, in   string
		gone, keep []string
	}{
		{"openai", "key=sk-proj-AbCdEf0123456789xyz done", []string{"AbCdEf0123456789xyz"}, []string{"key=sk-" + Marker, "done"}},
		{"anthropic", "sk-ant-api03-ZZZZyyyyXXXXwwww", []string{"api03-ZZZZ"}, []string{"sk-ant-" + Marker}},
		{"github", "token ghp_0123456789abcdefABCDEF0123 end", []string{"0123456789abcdefABCDEF"}, []string{"ghp_" + Marker, "end"}},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijkl", []string{"11ABCDEFG"}, []string{"github_pat_" + Marker}},
		{"aws", "AKIAIOSFODNN7EXAMPLE is the id", []string{"IOSFODNN7EXAMPLE"}, []string{"AKIA" + Marker, "is the id"}},
		{"bearer", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", []string{"eyJhbGci"}, []string{"Bearer " + Marker}},
		{"bearer lower", "bearer abcdefgh12345678", []string{"abcdefgh12345678"}, []string{"bearer " + Marker}},
		{"bearer mixed case", "Authorization: BeArEr abcdefgh12345678", []string{"abcdefgh12345678"}, []string{"BeArEr " + Marker}},
		{"pem", "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA PRIVATE KEY-----\ny", []string{"MIIEow", "AAAA"}, []string{"x\n[REDACTED PRIVATE KEY]\ny"}},
		{"pem cut off", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r", []string{"b3BlbnNzaC1r"}, []string{"[REDACTED PRIVATE KEY]"}},
		{"plain text untouched", "ask-me about the sky- and risk-free things", nil, []string{"ask-me about the sky- and risk-free things"}},
		{"short sk- untouched", "task-list", nil, []string{"task-list"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := r.Redact(c.in)
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("Redact(%q) = %q still contains %q", c.in, got, g)
				}
			}
			for _, k := range c.keep {
				if !strings.Contains(got, k) {
					t.Errorf("Redact(%q) = %q, want it to contain %q", c.in, got, k)
				}
			}
		})
	}
}

func TestSummaryRedactsBeforeTruncating(t *testing.T) {
	r := New()
	// The key straddles the 500-rune limit: truncating first would keep a
	// recognisable prefix of it that no pattern matches any more.
	in := strings.Repeat("a", 490) + " sk-ant-api03-SECRETSECRETSECRET"
	got := r.Summary(in, 500)
	if strings.Contains(got, "api03") {
		t.Fatalf("summary leaked part of the key: %q", got[480:])
	}
	if n := utf8.RuneCountInString(got); n > 500 {
		t.Fatalf("summary has %d runes, want <= 500", n)
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "hé"},
		{"日本語テキスト", 3, "日本語"},
		{"ok\xffbad", 10, "ok\uFFFDbad"},
		{"", 5, ""},
	}
	for _, c := range cases {
		if got := Truncate(c.in, c.n); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
