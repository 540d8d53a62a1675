package token

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/glob"
)

// Bounds of every token, whatever the plugin asks for (a
// plugin got a 10-year token with 2^31 operations). A request beyond them
// is refused, not clipped, so the plugin learns what it holds.
const (
	// DefaultTTL is a token's lifetime when the scope does not give one.
	DefaultTTL = 30 * time.Second
	// MaxTTL is the longest lifetime a token may have.
	MaxTTL = 5 * time.Minute
	// MaxOps is the most operations one token may grant.
	MaxOps = 1000
	// MaxLivePerInstance is how many unexpired tokens one plugin instance
	// may hold at once; expired ones do not count.
	MaxLivePerInstance = 64
)

// ErrLimit is wrapped by Issue's refusals of a scope beyond the bounds
// or an instance holding MaxLivePerInstance tokens.
var ErrLimit = errors.New("capability token limit")

// Binding is who may use a token: one plugin instance, seen through one peer.
type Binding struct {
	Instance    string // plugin instance id
	PID         int    // peer pid (SO_PEERCRED)
	ContainerID string // the L2 container the peer runs in
}

// Scope is what a token allows.
type Scope struct {
	Syscall string        // exact syscall type, e.g. "fs.write"
	Paths   []string      // gitignore-style globs; empty = the syscall carries no path
	MaxOps  int           // > 0
	TTL     time.Duration // 0 = DefaultTTL
}

// Token is an issued grant, as returned to the kernel to hand to the plugin.
type Token struct {
	ID      string
	Binding Binding
	Scope   Scope
	Issued  time.Time
	Expires time.Time
}

// Status is the outcome of checking a use.
type Status uint8

const (
	Valid Status = iota
	Unknown
	Expired
	Exhausted
	BindingMismatch
	ScopeMismatch
	Replay
)

var statusText = [...]string{
	Valid:           "valid",
	Unknown:         "unknown token",
	Expired:         "token expired",
	Exhausted:       "token has no operations left (maxOps)",
	BindingMismatch: "token is bound to another plugin instance, peer pid or container",
	ScopeMismatch:   "token does not cover this syscall or path",
	Replay:          "token nonce is not larger than the last one used (replay)",
}

func (s Status) String() string {
	if int(s) < len(statusText) {
		return statusText[s]
	}
	return fmt.Sprintf("status(%d)", s)
}

// Use is what a request presents: the token id and a fresh nonce.
type Use struct {
	ID    string
	Nonce uint64
}

type entry struct {
	tok       Token
	paths     *glob.Set
	used      int
	lastNonce uint64
	seenNonce bool
}

// Store holds live tokens. It is safe for concurrent use.
type Store struct {
	mu     sync.Mutex
	tokens map[string]*entry
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{tokens: make(map[string]*entry)} }

// Issue creates a token. now is the issuing time.
func (s *Store) Issue(b Binding, sc Scope, now time.Time) (Token, error) {
	if sc.Syscall == "" {
		return Token{}, fmt.Errorf("issue token: scope has no syscall")
	}
	if sc.MaxOps <= 0 {
		return Token{}, fmt.Errorf("issue token: maxOps must be positive, got %d", sc.MaxOps)
	}
	if sc.MaxOps > MaxOps {
		return Token{}, fmt.Errorf("issue token: %w: maxOps %d is over the bound of %d", ErrLimit, sc.MaxOps, MaxOps)
	}
	if sc.TTL < 0 {
		return Token{}, fmt.Errorf("issue token: negative TTL %v", sc.TTL)
	}
	if sc.TTL == 0 {
		sc.TTL = DefaultTTL
	}
	if sc.TTL > MaxTTL {
		return Token{}, fmt.Errorf("issue token: %w: lifetime %v is over the bound of %v", ErrLimit, sc.TTL, MaxTTL)
	}
	if b.Instance == "" {
		return Token{}, fmt.Errorf("issue token: binding has no plugin instance")
	}
	paths, err := glob.CompileSet(sc.Paths)
	if err != nil {
		return Token{}, fmt.Errorf("issue token: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Token{}, fmt.Errorf("issue token: random id: %w", err)
	}
	sc.Paths = append([]string(nil), sc.Paths...)
	t := Token{ID: "cap_" + hex.EncodeToString(raw[:]), Binding: b, Scope: sc, Issued: now, Expires: now.Add(sc.TTL)}
	s.mu.Lock()
	defer s.mu.Unlock()
	live := 0
	for _, e := range s.tokens { // bounded: at most MaxLivePerInstance per instance
		if e.tok.Binding.Instance == b.Instance && now.Before(e.tok.Expires) && e.used < e.tok.Scope.MaxOps {
			live++
		}
	}
	if live >= MaxLivePerInstance {
		return Token{}, fmt.Errorf("issue token: %w: instance %s already holds %d live tokens", ErrLimit, b.Instance, live)
	}
	s.tokens[t.ID] = &entry{tok: t, paths: paths}
	return t, nil
}

// Consume checks u for a request made by b for syscall on p at time now
// and, when valid, counts one operation and records the nonce. A token is
// valid strictly before its expiry instant.
func (s *Store) Consume(u Use, b Binding, syscall string, p glob.Path, now time.Time) Status {
	return s.check(u, b, syscall, p, now, true)
}

// Peek is Consume without counting the operation (for explain).
func (s *Store) Peek(u Use, b Binding, syscall string, p glob.Path, now time.Time) Status {
	return s.check(u, b, syscall, p, now, false)
}

func (s *Store) check(u Use, b Binding, syscall string, p glob.Path, now time.Time, consume bool) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.tokens[u.ID]
	if !ok {
		return Unknown
	}
	if !now.Before(e.tok.Expires) {
		if consume {
			delete(s.tokens, u.ID)
		}
		return Expired
	}
	if e.used >= e.tok.Scope.MaxOps {
		return Exhausted
	}
	if e.tok.Binding != b {
		return BindingMismatch
	}
	if syscall != e.tok.Scope.Syscall {
		return ScopeMismatch
	}
	if e.paths.Len() == 0 {
		if !p.Empty() {
			return ScopeMismatch
		}
	} else if !e.paths.Match(p) {
		return ScopeMismatch
	}
	if e.seenNonce && u.Nonce <= e.lastNonce {
		return Replay
	}
	if consume {
		e.used++
		e.lastNonce, e.seenNonce = u.Nonce, true
	}
	return Valid
}

// Revoke removes a token; it reports whether it existed.
func (s *Store) Revoke(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tokens[id]
	delete(s.tokens, id)
	return ok
}

// Sweep removes tokens expired at now or exhausted and returns them, so the
// kernel can record capability_expired events.
func (s *Store) Sweep(now time.Time) []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Token
	for id, e := range s.tokens {
		if !now.Before(e.tok.Expires) || e.used >= e.tok.Scope.MaxOps {
			out = append(out, e.tok)
			delete(s.tokens, id)
		}
	}
	return out
}

// RevokeInstance removes every token bound to instance (it stopped) and
// returns them.
func (s *Store) RevokeInstance(instance string) []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Token
	for id, e := range s.tokens {
		if e.tok.Binding.Instance == instance {
			out = append(out, e.tok)
			delete(s.tokens, id)
		}
	}
	return out
}

// RevokeAll removes every token (the policy they were judged by was
// replaced) and returns them.
func (s *Store) RevokeAll() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Token, 0, len(s.tokens))
	for id, e := range s.tokens {
		out = append(out, e.tok)
		delete(s.tokens, id)
	}
	return out
}

// Len is the number of live tokens.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}
