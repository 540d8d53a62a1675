package token

import (
	"errors"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/glob"
)

var (
	t0   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	bind = Binding{Instance: "tool-fs#1", PID: 4242, ContainerID: "c0ffee"}
)

func issue(t *testing.T, s *Store, sc Scope) Token {
	t.Helper()
	tok, err := s.Issue(bind, sc, t0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenChecks(t *testing.T) {
	src := glob.ParsePath("src/a.go")
	cases := []struct {
		name  string
		scope Scope
		uses  []func(s *Store, id string) Status
		want  []Status
	}{
		{"valid then replay", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 5},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status { return s.Consume(Use{id, 1}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Consume(Use{id, 1}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Consume(Use{id, 0}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Consume(Use{id, 2}, bind, "fs.write", src, t0) },
			}, []Status{Valid, Replay, Replay, Valid}},
		{"maxOps exhausted", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 2},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status { return s.Consume(Use{id, 1}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Consume(Use{id, 2}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Consume(Use{id, 3}, bind, "fs.write", src, t0) },
			}, []Status{Valid, Valid, Exhausted}},
		{"TTL boundary", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 5, TTL: time.Second},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status {
					return s.Consume(Use{id, 1}, bind, "fs.write", src, t0.Add(time.Second-time.Nanosecond))
				},
				func(s *Store, id string) Status {
					return s.Consume(Use{id, 2}, bind, "fs.write", src, t0.Add(time.Second))
				},
				func(s *Store, id string) Status { return s.Consume(Use{id, 3}, bind, "fs.write", src, t0) },
			}, []Status{Valid, Expired, Unknown}},
		{"default TTL is 30s", Scope{Syscall: "fs.read", Paths: []string{"**"}, MaxOps: 5},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status {
					return s.Consume(Use{id, 1}, bind, "fs.read", src, t0.Add(30*time.Second-1))
				},
				func(s *Store, id string) Status {
					return s.Consume(Use{id, 2}, bind, "fs.read", src, t0.Add(30*time.Second))
				},
			}, []Status{Valid, Expired}},
		{"container mismatch", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 5},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status {
					b := bind
					b.ContainerID = "other"
					return s.Consume(Use{id, 1}, b, "fs.write", src, t0)
				},
				func(s *Store, id string) Status {
					b := bind
					b.PID = 1
					return s.Consume(Use{id, 2}, b, "fs.write", src, t0)
				},
				func(s *Store, id string) Status {
					b := bind
					b.Instance = "tool-fs#2"
					return s.Consume(Use{id, 3}, b, "fs.write", src, t0)
				},
				func(s *Store, id string) Status { return s.Consume(Use{id, 4}, bind, "fs.write", src, t0) },
			}, []Status{BindingMismatch, BindingMismatch, BindingMismatch, Valid}},
		{"scope mismatch", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 5},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status { return s.Consume(Use{id, 1}, bind, "fs.read", src, t0) },
				func(s *Store, id string) Status {
					return s.Consume(Use{id, 2}, bind, "fs.write", glob.ParsePath("tests/a.go"), t0)
				},
				func(s *Store, id string) Status { return s.Consume(Use{id, 3}, bind, "fs.write", glob.Path{}, t0) },
			}, []Status{ScopeMismatch, ScopeMismatch, ScopeMismatch}},
		{"unknown id", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 5},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status { return s.Consume(Use{id + "x", 1}, bind, "fs.write", src, t0) },
			}, []Status{Unknown}},
		{"peek does not consume", Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 1},
			[]func(*Store, string) Status{
				func(s *Store, id string) Status { return s.Peek(Use{id, 1}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Peek(Use{id, 1}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Consume(Use{id, 1}, bind, "fs.write", src, t0) },
				func(s *Store, id string) Status { return s.Peek(Use{id, 2}, bind, "fs.write", src, t0) },
			}, []Status{Valid, Valid, Valid, Exhausted}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewStore()
			tok := issue(t, s, c.scope)
			for i, use := range c.uses {
				if got := use(s, tok.ID); got != c.want[i] {
					t.Errorf("use %d: got %v want %v", i, got, c.want[i])
				}
			}
		})
	}
}

func TestIssueErrorsAndSweep(t *testing.T) {
	s := NewStore()
	for _, sc := range []Scope{{MaxOps: 1}, {Syscall: "fs.write"}, {Syscall: "fs.write", MaxOps: 1, TTL: -1}, {Syscall: "fs.write", MaxOps: 1, Paths: []string{"#x"}}} {
		if _, err := s.Issue(bind, sc, t0); err == nil {
			t.Errorf("Issue(%+v): want error", sc)
		}
	}
	if _, err := s.Issue(Binding{}, Scope{Syscall: "fs.write", MaxOps: 1}, t0); err == nil {
		t.Error("Issue without instance: want error")
	}
	a := issue(t, s, Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 1, TTL: time.Second})
	b := issue(t, s, Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 1, TTL: time.Minute})
	if a.ID == b.ID {
		t.Fatal("token ids collide")
	}
	gone := s.Sweep(t0.Add(2 * time.Second))
	if len(gone) != 1 || gone[0].ID != a.ID || s.Len() != 1 {
		t.Fatalf("sweep: %+v, live %d", gone, s.Len())
	}
	if !s.Revoke(b.ID) || s.Revoke(b.ID) {
		t.Error("revoke")
	}
}

func BenchmarkConsume(b *testing.B) {
	s := NewStore()
	var tok Token
	p := glob.ParsePath("src/pkg/a.go")
	b.ReportAllocs()
	var n uint64
	for b.Loop() {
		if n%MaxOps == 0 { // a token grants at most MaxOps operations
			s.Revoke(tok.ID)
			var err error
			if tok, err = s.Issue(bind, Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: MaxOps, TTL: MaxTTL}, t0); err != nil {
				b.Fatal(err)
			}
		}
		n++
		if s.Consume(Use{tok.ID, n}, bind, "fs.write", p, t0) != Valid {
			b.Fatal("invalid")
		}
	}
}

// A plugin was issued a 10-year token granting 2^31
// operations, and as many tokens as it asked for. Every bound is refused
// with ErrLimit; a used-up or expired token frees its slot.
func TestIssueBounds(t *testing.T) {
	s := NewStore()
	for _, sc := range []Scope{
		{Syscall: "fs.read", MaxOps: MaxOps + 1},
		{Syscall: "fs.read", MaxOps: 1 << 31},
		{Syscall: "fs.read", MaxOps: 1, TTL: MaxTTL + time.Nanosecond},
		{Syscall: "fs.read", MaxOps: 1, TTL: 10 * 365 * 24 * time.Hour},
	} {
		if _, err := s.Issue(bind, sc, t0); !errors.Is(err, ErrLimit) {
			t.Fatalf("scope %+v: %v, want ErrLimit", sc, err)
		}
	}
	if _, err := s.Issue(bind, Scope{Syscall: "fs.read", MaxOps: MaxOps, TTL: MaxTTL}, t0); err != nil {
		t.Fatalf("the bounds themselves are allowed: %v", err)
	}
	for i := 1; i < MaxLivePerInstance; i++ {
		issue(t, s, Scope{Syscall: "fs.read", MaxOps: 1, TTL: time.Second})
	}
	if _, err := s.Issue(bind, Scope{Syscall: "fs.read", MaxOps: 1}, t0); !errors.Is(err, ErrLimit) {
		t.Fatalf("token %d for one instance: %v, want ErrLimit", MaxLivePerInstance+1, err)
	}
	other := bind
	other.Instance = "tool-fs#2"
	if _, err := s.Issue(other, Scope{Syscall: "fs.read", MaxOps: 1}, t0); err != nil {
		t.Fatalf("another instance has its own bound: %v", err)
	}
	// One second later the short ones expired: slots are free again.
	if _, err := s.Issue(bind, Scope{Syscall: "fs.read", MaxOps: 1}, t0.Add(time.Second)); err != nil {
		t.Fatalf("expired tokens still count: %v", err)
	}
	if got := len(s.RevokeInstance(bind.Instance)); got != MaxLivePerInstance+1 {
		t.Fatalf("RevokeInstance removed %d tokens", got)
	}
	if s.Len() != 1 || len(s.RevokeAll()) != 1 || s.Len() != 0 {
		t.Fatal("RevokeAll leaves tokens")
	}
}
