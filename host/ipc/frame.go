package ipc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Message types.
const (
	TypeRequest  = "request"
	TypeResponse = "response"
	TypeEvent    = "event"
)

// DefaultMaxFrame bounds one frame's payload. Requests are small; events
// carry at most a tool result or a diff, which the kernel caps well below.
const DefaultMaxFrame = 8 << 20

// Message is one frame's payload.
type Message struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a response's error: the code/message/retryable plus the
// what/why/fix of the error display standard, so the CLI renders kernel
// errors exactly as it renders its own.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Why       string `json:"why,omitempty"`
	Fix       string `json:"fix,omitempty"`
	// Plugin is set when a plugin wrote the error (uerr.Error.Plugin):
	// the code is in that plugin's namespace and the CLI shows the text
	// as the plugin's.
	Plugin string `json:"plugin,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// UserError converts e to the CLI's error shape.
func (e *Error) UserError() *uerr.Error {
	if e.Plugin != "" {
		return uerr.FromPlugin(e.Plugin, e.Code, e.Message, e.Why, e.Fix)
	}
	return uerr.New(e.Code, e.Message, e.Why, e.Fix)
}

// ErrorFrom converts any error to a wire error.
func ErrorFrom(err error, retryable bool) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	u := uerr.From(err)
	return &Error{Code: u.Code, Message: u.What, Why: u.Why, Fix: u.Fix, Retryable: retryable, Plugin: u.Plugin}
}

// Codes of the channel itself.
const (
	CodeFrameTooLarge = "IPC_FRAME_TOO_LARGE"
	CodeBadFrame      = "IPC_BAD_FRAME"
	CodePeerRefused   = "IPC_PEER_REFUSED"
	CodeUnknownMethod = "IPC_UNKNOWN_METHOD"
	CodeClosed        = "IPC_CLOSED"
)

// FrameError is a framing failure; the connection cannot continue after it
// (the stream position is lost), so the reader closes it.
type FrameError struct {
	Code string
	Msg  string
}

func (e *FrameError) Error() string { return e.Code + ": " + e.Msg }

// ReadFrame reads one frame. A declared length over max is refused before
// anything is allocated; a payload that is not UTF-8 JSON is refused.
// io.EOF is returned only for a clean end between frames.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &FrameError{CodeBadFrame, "connection closed inside a frame header"}
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, &FrameError{CodeFrameTooLarge, fmt.Sprintf("frame declares %d bytes; the limit is %d", n, max)}
	}
	if n == 0 {
		return nil, &FrameError{CodeBadFrame, "empty frame"}
	}
	buf := make([]byte, n)
	if got, err := io.ReadFull(r, buf); err != nil {
		return nil, &FrameError{CodeBadFrame, fmt.Sprintf("connection closed after %d of %d payload bytes", got, n)}
	}
	if !utf8.Valid(buf) || !json.Valid(buf) {
		return nil, &FrameError{CodeBadFrame, "payload is not UTF-8 JSON"}
	}
	return buf, nil
}

// WriteFrame writes payload as one frame.
func WriteFrame(w io.Writer, payload []byte, max int) error {
	if len(payload) > max {
		return &FrameError{CodeFrameTooLarge, fmt.Sprintf("frame of %d bytes exceeds the limit of %d", len(payload), max)}
	}
	buf := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(len(payload)))
	copy(buf[4:], payload)
	_, err := w.Write(buf)
	return err
}

// decode parses and checks a frame's message.
func decode(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, &FrameError{CodeBadFrame, "payload is not a message object: " + err.Error()}
	}
	switch m.Type {
	case TypeRequest:
		if m.Method == "" {
			return Message{}, &FrameError{CodeBadFrame, "request without a method"}
		}
	case TypeResponse, TypeEvent:
	default:
		return Message{}, &FrameError{CodeBadFrame, fmt.Sprintf("unknown message type %q", m.Type)}
	}
	if m.ID == "" || len(m.ID) > 128 {
		return Message{}, &FrameError{CodeBadFrame, "message id missing or longer than 128 bytes"}
	}
	return m, nil
}
