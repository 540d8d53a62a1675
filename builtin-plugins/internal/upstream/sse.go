package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Bounds on an event stream (model output is untrusted).
const (
	MaxEventBytes  = 4 << 20
	MaxStreamBytes = 64 << 20
)

// ErrTooLarge: an event or the whole stream is over its bound.
var ErrTooLarge = errors.New("server-sent event stream over its size limit")

// SSEEvent is one server-sent event.
type SSEEvent struct {
	Event string // the event: field ("" when absent)
	Data  []byte // data: lines joined with \n
}

// SSEReader reads server-sent events (the text/event-stream format:
// "field: value" lines, events ended by a blank line, ":" comments,
// multi-line data joined with "\n", CRLF or LF).
type SSEReader struct {
	r     *bufio.Reader
	total int
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// an event cut off by the end (no blank line after it) is returned first
// with io.ErrUnexpectedEOF.
func (s *SSEReader) Next() (SSEEvent, error) {
	var ev SSEEvent
	var data bytes.Buffer
	hasData, any := false, false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && any {
				ev.Data = data.Bytes()
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		if len(line) == 0 {
			if !any {
				continue
			}
			ev.Data = data.Bytes()
			return ev, nil
		}
		if line[0] == ':' {
			continue // comment / keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			ev.Event, any = string(value), true
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData, any = true, true
		}
		if data.Len() > MaxEventBytes {
			return ev, fmt.Errorf("an event of more than %d bytes: %w", MaxEventBytes, ErrTooLarge)
		}
	}
}

// readLine returns one line without its line ending, bounded.
func (s *SSEReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		line = append(line, chunk...)
		s.total += len(chunk)
		if s.total > MaxStreamBytes {
			return nil, fmt.Errorf("a stream of more than %d bytes: %w", MaxStreamBytes, ErrTooLarge)
		}
		if len(line) > MaxEventBytes {
			return nil, fmt.Errorf("a line of more than %d bytes: %w", MaxEventBytes, ErrTooLarge)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				// A last line without a newline: return it; the next
				// call sees EOF.
				return bytes.TrimRight(line, "\r"), nil
			}
			return nil, err
		}
		line = line[:len(line)-1]
		return bytes.TrimSuffix(line, []byte("\r")), nil
	}
}
