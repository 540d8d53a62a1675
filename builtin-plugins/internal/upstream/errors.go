package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// MaxErrorBody bounds how much of an error response is read.
const MaxErrorBody = 64 << 10

// Upstream is the provider name in messages ("OpenAI", "Anthropic") and
// the config key prefix ("providers.openai").
type Upstream struct {
	Name      string
	ConfigKey string
	KeyEnv    string // OPENAI_API_KEY
}

// APIError is the error detail an upstream sent (both OpenAI's
// {"error":{"message","type","code"}} and Anthropic's
// {"type":"error","error":{"type","message"}} decode into it).
type APIError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// CodeString is the error's code as text (OpenAI sends a string or null).
func (e APIError) CodeString() string {
	var s string
	if json.Unmarshal(e.Code, &s) == nil {
		return s
	}
	return ""
}

// DecodeAPIError extracts the error detail of a JSON body.
func DecodeAPIError(body []byte) (APIError, bool) {
	var w struct {
		Error *APIError `json:"error"`
	}
	if json.Unmarshal(body, &w) == nil && w.Error != nil {
		return *w.Error, true
	}
	return APIError{}, false
}

// Clean escapes control characters of untrusted text and bounds it.
func Clean(s string, n int) string {
	r := []rune(s)
	cut := len(r) > n
	if cut {
		r = r[:n]
	}
	out := strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return ' '
		}
		return c
	}, string(r))
	if cut {
		out += "…"
	}
	return out
}

// RetryAfter reads Retry-After (seconds or an HTTP date) and retry-after-ms.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v >= 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	ra := h.Get("Retry-After")
	if ra == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(ra, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(ra); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// HTTPError maps a non-2xx response to a provider error; it reads (a
// bounded part of) the body. requestIDHeader names the upstream's request
// id header.
func (u Upstream) HTTPError(resp *http.Response, requestIDHeader string) *uerr.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	ae, ok := DecodeAPIError(body)
	msg := ae.Message
	if !ok {
		msg = strings.TrimSpace(string(body))
	}
	info := provider.RetryInfo{HTTPStatus: resp.StatusCode, After: RetryAfter(resp.Header, time.Now()), UpstreamRequestID: Clean(resp.Header.Get(requestIDHeader), 200)}
	e := u.Classify(resp.StatusCode, ae.Type, ae.CodeString(), msg, info)
	// Anthropic's x-should-retry overrides the status-based decision.
	switch strings.ToLower(resp.Header.Get("X-Should-Retry")) {
	case "true":
		setRetry(e, true)
	case "false":
		setRetry(e, false)
	}
	return e
}

func setRetry(e *uerr.Error, v bool) {
	var ri *provider.RetryInfo
	if errors.As(e, &ri) {
		ri.Retryable = v
	}
}

// Classify builds the provider error for an HTTP status (0: an error
// inside a 200 stream) with the upstream's error type, code and message.
func (u Upstream) Classify(status int, typ, code, msg string, info provider.RetryInfo) *uerr.Error {
	m := Clean(msg, 500)
	why := fmt.Sprintf("%s answered", u.Name)
	if status != 0 {
		why += fmt.Sprintf(" HTTP %d", status)
	}
	if typ != "" || code != "" {
		why += " (" + Clean(strings.Trim(typ+" "+code, " "), 100) + ")"
	}
	if m != "" {
		why += ": " + m
	}
	lower := strings.ToLower(typ + " " + code + " " + msg)
	mk := func(c, what, fix string, retry bool) *uerr.Error {
		info.Retryable = retry
		return provider.NewError(c, what, why, fix, info)
	}
	switch {
	case code == "context_length_exceeded" || strings.Contains(lower, "prompt is too long") || strings.Contains(lower, "maximum context length"):
		return mk(provider.CodeContextLength, "the conversation does not fit the model's context window", "summarize the conversation or start a new session", false)
	case status == http.StatusUnauthorized || typ == "authentication_error":
		return mk(provider.CodeAuth, u.Name+" refused the API key",
			fmt.Sprintf("set a valid key in %s or in the file named by %s.api_key_file", u.KeyEnv, u.ConfigKey), false)
	case status == http.StatusForbidden || typ == "permission_error":
		return mk(provider.CodeForbidden, u.Name+" does not allow this key to use the model or endpoint", "use a key with access to it, or choose another model", false)
	case status == http.StatusNotFound || typ == "not_found_error" || code == "model_not_found":
		return mk(provider.CodeModelNotFound, u.Name+" does not know the model or endpoint", "check "+u.ConfigKey+".model and "+u.ConfigKey+".base_url", false)
	case code == "insufficient_quota" || strings.Contains(lower, "billing") || strings.Contains(lower, "spend"):
		return mk(provider.CodeQuota, u.Name+" quota or spend limit is exhausted", "raise the limit or add credit in the provider's console; retrying does not help", false)
	case status == http.StatusTooManyRequests || typ == "rate_limit_error":
		return mk(provider.CodeRateLimited, u.Name+" rate-limited the request", "wait and retry, or lower scheduler.per_template.ai-provider", true)
	case status == 529 || status == http.StatusServiceUnavailable || typ == "overloaded_error":
		return mk(provider.CodeOverloaded, u.Name+" is overloaded", "retry in a moment", true)
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity || typ == "invalid_request_error":
		return mk(provider.CodeBadRequest, u.Name+" refused the request", "check the model and request settings; this is a bug in fluffy if they are right", false)
	case status >= 500 || status == 0 || status == http.StatusRequestTimeout || status == http.StatusConflict:
		return mk(provider.CodeUpstream, u.Name+" failed to answer", "retry; if it persists, check the provider's status page", true)
	}
	return mk(provider.CodeUpstream, u.Name+" refused the request", "check "+u.ConfigKey+" settings", false)
}

// TransportError maps a failed request or a broken stream; delivered
// says whether the stream already produced output (no retry then).
func (u Upstream) TransportError(ctx context.Context, err error, baseURL string, delivered bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	msg := Clean(err.Error(), 500)
	if strings.Contains(msg, "via proxy") && strings.Contains(msg, "403") {
		host := baseURL
		if pu, perr := url.Parse(baseURL); perr == nil && pu.Host != "" {
			host = pu.Host
		}
		return provider.NewError(provider.CodeNetworkDenied, "the kernel's proxy refused the connection to "+Clean(host, 200), msg,
			"if "+u.ConfigKey+".base_url is right, allow its host in the policy's network_whitelist; otherwise change "+u.ConfigKey+".base_url", provider.RetryInfo{})
	}
	if errors.Is(err, ErrTooLarge) {
		return provider.NewError(provider.CodeStreamMalformed, u.Name+"'s answer is too large", msg, "retry with a lower max_tokens", provider.RetryInfo{})
	}
	if delivered {
		return provider.NewError(provider.CodeStreamIncomplete, u.Name+"'s stream broke off", msg, "retry the turn", provider.RetryInfo{Retryable: true})
	}
	return provider.NewError(provider.CodeUnreachable, u.Name+" could not be reached at "+Clean(baseURL, 200), msg,
		"check the network and "+u.ConfigKey+".base_url", provider.RetryInfo{Retryable: true})
}
