package upstream

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// RetryConfig is the "retry" object of the Configure JSON. The SDKs' own
// retries are off: this is the one retry mechanism of the provider
// plugins.
type RetryConfig struct {
	// MaxRetries after the first attempt (default 2; 0 disables).
	MaxRetries *int `json:"max_retries,omitempty"`
	// InitialMS and MaxMS bound the jittered exponential backoff between
	// attempts (defaults 500 ms and 8 s).
	InitialMS int `json:"initial_ms,omitempty"`
	MaxMS     int `json:"max_ms,omitempty"`
	// MaxWaitMS is the longest retry-after the plugin waits itself
	// (default 60 s); a longer one ends the turn with the error, whose
	// RetryInfo.After carries the hint.
	MaxWaitMS int `json:"max_wait_ms,omitempty"`
}

func (c RetryConfig) withDefaults() RetryConfig {
	if c.MaxRetries == nil {
		n := 2
		c.MaxRetries = &n
	}
	if c.InitialMS <= 0 {
		c.InitialMS = 500
	}
	if c.MaxMS <= 0 {
		c.MaxMS = 8000
	}
	if c.MaxWaitMS <= 0 {
		c.MaxWaitMS = 60000
	}
	return c
}

// Retry runs attempt until it succeeds or fails in a way that retrying
// cannot fix. attempt reports whether it delivered any event: a turn that
// delivered output (text, reasoning, a tool call) is never repeated. A
// retryable failure (provider.RetryInfo.Retryable: 429 that is not a
// quota, 5xx, 529, overloaded, a connection that failed before the first
// byte; x-should-retry already folded in) waits the longer of the
// jittered backoff and the upstream's retry-after.
//
// The error it returns says how many requests were sent
// (RetryInfo.Attempts) and, when the retry budget ran out on a retryable
// failure, RetriesSpent: the classification stays Retryable, but the
// kernel's agent loop does not repeat the turn, so a failing upstream sees
// at most 1+max_retries requests per turn instead of the product of both
// loops.
func (c RetryConfig) Retry(ctx context.Context, log hclog.Logger, attempt func() (delivered bool, err error)) error {
	c = c.withDefaults()
	exp := backoff.NewExponentialBackOff()
	exp.InitialInterval = time.Duration(c.InitialMS) * time.Millisecond
	exp.MaxInterval = time.Duration(c.MaxMS) * time.Millisecond
	exp.RandomizationFactor = 0.5
	exp.MaxElapsedTime = 0
	exp.Reset()
	b := backoff.WithMaxRetries(exp, uint64(max(*c.MaxRetries, 0)))
	for n := 1; ; n++ {
		delivered, err := attempt()
		if err == nil {
			return nil
		}
		if delivered || ctx.Err() != nil {
			return attempts(err, n, false)
		}
		ri := provider.RetryOf(err)
		if !ri.Retryable {
			return attempts(err, n, false)
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return attempts(err, n, true)
		}
		if ri.After > wait {
			if ri.After > time.Duration(c.MaxWaitMS)*time.Millisecond {
				return attempts(err, n, false)
			}
			wait = ri.After
		}
		log.Warn("retrying the request", "attempt", n, "wait", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// attempts records on err's RetryInfo how many requests this turn sent and
// whether the retry budget is spent. The classification (Retryable) is
// left as it is: a spent budget does not make a transient failure
// permanent, it only means nobody should repeat it right away.
func attempts(err error, n int, spent bool) error {
	var ri *provider.RetryInfo
	if errors.As(err, &ri) {
		ri.Attempts = n
		ri.RetriesSpent = spent && ri.Retryable
	}
	return err
}
