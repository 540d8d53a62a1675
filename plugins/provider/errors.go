package provider

import (
	"errors"
	"fmt"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes every provider plugin uses for the same situation, so the
// agent loop can react without knowing which provider it talks to.
const (
	// CodeAuth: the upstream refused the API key (HTTP 401).
	CodeAuth = "PROVIDER_AUTH"
	// CodeForbidden: the key may not use this model or endpoint (HTTP 403).
	CodeForbidden = "PROVIDER_FORBIDDEN"
	// CodeModelNotFound: the model does not exist for this key (HTTP 404).
	CodeModelNotFound = "PROVIDER_MODEL_NOT_FOUND"
	// CodeContextLength: the prompt does not fit the model's context
	// window. The agent reacts by summarizing the conversation.
	CodeContextLength = "PROVIDER_CONTEXT_LENGTH"
	// CodeRateLimited: too many requests for now (HTTP 429); retryable.
	CodeRateLimited = "PROVIDER_RATE_LIMITED"
	// CodeQuota: a spend cap or exhausted quota (HTTP 429 that retrying
	// cannot fix); never retried.
	CodeQuota = "PROVIDER_QUOTA_EXHAUSTED"
	// CodeOverloaded: the upstream is overloaded (HTTP 529, 503,
	// overloaded_error); retryable.
	CodeOverloaded = "PROVIDER_OVERLOADED"
	// CodeUpstream: any other upstream failure (5xx, an error event).
	CodeUpstream = "PROVIDER_UPSTREAM_ERROR"
	// CodeBadRequest: the upstream refused the request as malformed (400).
	CodeBadRequest = "PROVIDER_BAD_REQUEST"
	// CodeStreamIncomplete: the stream ended before the API's finish
	// signal (finish_reason, message_stop) or broke mid-way.
	CodeStreamIncomplete = "PROVIDER_STREAM_INCOMPLETE"
	// CodeStreamMalformed: the upstream sent something that is not the
	// wire format (undecodable JSON, an event out of order).
	CodeStreamMalformed = "PROVIDER_STREAM_MALFORMED"
	// CodeNetworkDenied: the kernel's proxy refused the upstream host.
	CodeNetworkDenied = "PROVIDER_NETWORK_DENIED"
	// CodeUnreachable: the upstream could not be reached.
	CodeUnreachable = "PROVIDER_UNREACHABLE"
	// CodeConfig: the plugin's configuration is unusable (no key, bad URL).
	CodeConfig = "PROVIDER_CONFIG"
	// CodeToolNames: two tools map to the same wire name, or a name cannot
	// be sent to providers.
	CodeToolNames = "PROVIDER_TOOL_NAMES"
	// CodeInvalidToolCall: a tool call whose arguments were cut off or are
	// not a JSON object (ToolCallEnd.Invalid). Never executed.
	CodeInvalidToolCall = "PROVIDER_INVALID_TOOL_CALL"
	// CodeBadRequestShape: the kernel's request cannot be expressed for this
	// provider (for example more cache breakpoints than it allows).
	CodeBadRequestShape = "PROVIDER_REQUEST_INVALID"
)

// RetryInfo says whether and when a failed turn may be retried. It travels
// as the Err (cause) of the turn's *uerr.Error; RetryOf reads it back.
type RetryInfo struct {
	Retryable  bool
	After      time.Duration // 0: no hint
	HTTPStatus int           // 0: not an HTTP status error
	// UpstreamRequestID is the upstream's id for the failed request, for
	// support tickets.
	UpstreamRequestID string
	// Attempts is how many requests the plugin sent upstream for this
	// turn before giving up (0: not said, as from older plugins).
	Attempts int
	// RetriesSpent: the plugin already retried this failure as far as its
	// own retry policy allows. Retryable keeps the classification (the
	// failure is transient); RetriesSpent tells the caller not to repeat
	// the turn itself, so retries do not stack (plugin × agent).
	RetriesSpent bool
}

func (r *RetryInfo) Error() string {
	s := fmt.Sprintf("retryable=%t", r.Retryable)
	if r.After > 0 {
		s += fmt.Sprintf(" after=%s", r.After)
	}
	if r.HTTPStatus != 0 {
		s += fmt.Sprintf(" status=%d", r.HTTPStatus)
	}
	if r.Attempts != 0 {
		s += fmt.Sprintf(" attempts=%d", r.Attempts)
	}
	if r.RetriesSpent {
		s += " retries_spent"
	}
	return s
}

// NewError builds a provider error with retry information.
func NewError(code, what, why, fix string, info RetryInfo) *uerr.Error {
	return uerr.Wrap(&info, code, what, why, fix)
}

// RetryOf returns the retry information in err's chain (zero when none).
func RetryOf(err error) RetryInfo {
	var ri *RetryInfo
	if errors.As(err, &ri) {
		return *ri
	}
	return RetryInfo{}
}

// InvalidCallResult is the tool result the model gets instead of running
// an invalid call (ToolCallEnd.Invalid).
func InvalidCallResult(end ToolCallEnd) Message {
	msg := "the tool call was not executed"
	if end.Invalid != nil {
		msg = "the tool call was not executed: " + end.Invalid.What
		if end.Invalid.Why != "" {
			msg += ": " + end.Invalid.Why
		}
		if end.Invalid.Fix != "" {
			msg += ". " + end.Invalid.Fix
		}
	}
	return Message{Role: RoleTool, ToolCallID: end.CallID, Content: msg, IsError: true}
}
