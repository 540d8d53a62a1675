package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// maxLastLine bounds how much of the line a body ends with is kept to
// judge whether it is whole; a longer unterminated line counts as cut.
const maxLastLine = 1 << 20

// EventStreamBody wraps the body of a server-sent event stream so that the
// last event reaches the decoder even when the server ended the body
// without the blank line that dispatches it (the SDKs' decoders follow
// the SSE rule and drop such an event, often the very message_stop or
// data: [DONE] that completes the answer).
//
// At the end of the body it adds the line breaks the last event lacks,
// but only when the last line is whole: it ended with a line break, or it
// is a data line holding [DONE] or one complete JSON value. A line cut in
// the middle gets nothing, so the decoder drops it as before and the
// stream reads as incomplete, not as malformed.
func EventStreamBody(rc io.ReadCloser) io.ReadCloser {
	return &eventStreamBody{rc: rc}
}

type eventStreamBody struct {
	rc   io.ReadCloser
	line []byte // what followed the last line break, up to maxLastLine
	over bool   // the last line passed maxLastLine
	seen bool   // any byte arrived
	tail []byte // the bytes added after the end of the body
	eof  bool
}

func (b *eventStreamBody) Read(p []byte) (int, error) {
	if b.eof {
		if len(b.tail) == 0 {
			return 0, io.EOF
		}
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	n, err := b.rc.Read(p)
	b.observe(p[:n])
	if err == io.EOF {
		b.eof, b.tail = true, b.ending()
		if n == 0 {
			return b.Read(p)
		}
		return n, nil
	}
	return n, err
}

func (b *eventStreamBody) observe(chunk []byte) {
	if len(chunk) == 0 {
		return
	}
	b.seen = true
	if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
		b.line, b.over = b.line[:0], false
		chunk = chunk[i+1:]
	}
	if b.over || len(b.line)+len(chunk) > maxLastLine {
		b.line, b.over = b.line[:0], true
		return
	}
	b.line = append(b.line, chunk...)
}

// ending is what the body lacks for its last event to be dispatched.
func (b *eventStreamBody) ending() []byte {
	switch {
	case !b.seen || b.over:
		return nil
	case len(b.line) == 0:
		// The last line ended; one more line break is the blank line
		// (an extra one after a blank line is ignored by every decoder).
		return []byte("\n")
	}
	line := bytes.TrimRight(b.line, "\r")
	field, value, _ := bytes.Cut(line, []byte(":"))
	if string(field) != "data" {
		return nil
	}
	value = bytes.TrimSpace(value)
	if string(value) == "[DONE]" || (len(value) > 0 && json.Valid(value)) {
		return []byte("\n\n")
	}
	return nil
}

func (b *eventStreamBody) Close() error { return b.rc.Close() }

// SniffJSON reports whether a response body holds one JSON document (its
// first byte other than white space is '{') rather than an event stream,
// as from a server that ignores "stream": true. The returned reader
// yields the whole body, the peeked bytes included.
func SniffJSON(body io.Reader) (bool, *bufio.Reader) {
	r := bufio.NewReader(body)
	for {
		c, err := r.ReadByte()
		if err != nil {
			return false, r
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		_ = r.UnreadByte()
		return c == '{', r
	}
}
