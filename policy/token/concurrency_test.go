package token

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/glob"
)

// TestConcurrentUse: many tokens used concurrently each give exactly
// maxOps valid operations, in nonce order,
// and one token shared by racing goroutines never exceeds maxOps nor
// accepts a nonce twice.
func TestConcurrentUse(t *testing.T) {
	s := NewStore()
	p := glob.ParsePath("src/a.go")
	const tokens, maxOps = MaxLivePerInstance - 1, 20 // + the shared one: the per-instance bound
	var wg sync.WaitGroup
	for i := 0; i < tokens; i++ {
		tok := issue(t, s, Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: maxOps, TTL: MaxTTL})
		wg.Add(1)
		go func() {
			defer wg.Done()
			valid := 0
			for n := uint64(1); n <= maxOps+5; n++ {
				st := s.Consume(Use{tok.ID, n}, bind, "fs.write", p, t0)
				if st == Valid {
					valid++
				} else if st != Exhausted || valid != maxOps {
					t.Errorf("token %s nonce %d: %v after %d valid", tok.ID, n, st, valid)
					return
				}
				if got := s.Consume(Use{tok.ID, n}, bind, "fs.write", p, t0); got != Replay && got != Exhausted {
					t.Errorf("reused nonce %d: %v", n, got)
					return
				}
			}
		}()
	}
	shared := issue(t, s, Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: maxOps, TTL: MaxTTL})
	var next atomic.Uint64
	var valid atomic.Int64
	var seen sync.Map
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 30; k++ {
				n := next.Add(1)
				switch st := s.Consume(Use{shared.ID, n}, bind, "fs.write", p, t0); st {
				case Valid:
					valid.Add(1)
					if _, dup := seen.LoadOrStore(n, true); dup {
						t.Errorf("nonce %d accepted twice", n)
					}
				case Replay, Exhausted:
				default:
					t.Errorf("shared token: %v", st)
				}
			}
		}()
	}
	wg.Wait()
	if v := valid.Load(); v < 1 || v > maxOps {
		t.Fatalf("shared token: %d valid operations, want 1..%d", v, maxOps)
	}
	if n := s.Len(); n != tokens+1 {
		t.Fatalf("Len = %d, want %d", n, tokens+1)
	}
	// After expiry Sweep removes every token.
	if got := len(s.Sweep(t0.Add(2 * time.Hour))); got != tokens+1 || s.Len() != 0 {
		t.Fatalf("Sweep returned %d tokens, %d left", got, s.Len())
	}
}
