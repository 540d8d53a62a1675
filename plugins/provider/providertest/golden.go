package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Capture is an http.RoundTripper that records each request body and
// answers 400 with an OpenAI/Anthropic-shaped JSON error, so a plugin's
// Chat returns after exactly one request without touching the network.
// Tests use it to see the body a provider plugin puts on the wire for any
// base URL (including https://api.openai.com, whose host changes it).
type Capture struct {
	mu     sync.Mutex
	bodies [][]byte
}

// RoundTrip records r's body and answers 400.
func (c *Capture) RoundTrip(r *http.Request) (*http.Response, error) {
	var b []byte
	if r.Body != nil {
		var err error
		if b, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
	}
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	const answer = `{"type":"error","error":{"type":"invalid_request_error","message":"captured"}}`
	return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(answer)),
		ContentLength: int64(len(answer)), Request: r}, nil
}

// Bodies returns the request bodies recorded so far.
func (c *Capture) Bodies() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.bodies...)
}

// canonical decodes JSON keeping numbers as written (json.Number), so
// equality is semantic (key order and whitespace do not matter) but a
// number must be spelled the same.
func canonical(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// Absent, as an accepted value in GoldenJSON, means the key is no longer
// sent.
var Absent = absent{}

type absent struct{}

// setPointer sets the value at JSON pointer p (RFC 6901, without escapes)
// in v, creating the last key of an object if needed.
func setPointer(v any, p string, val any) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := v
	for i, k := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if val == Absent {
					delete(c, k)
				} else {
					c[k] = val
				}
				return nil
			}
			cur = c[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(c) {
				return fmt.Errorf("pointer %s: no index %q", p, k)
			}
			if last {
				c[n] = val
				return nil
			}
			cur = c[n]
		default:
			return fmt.Errorf("pointer %s: %q is not in an object or array", p, k)
		}
	}
	return nil
}

// GoldenJSON compares got with the JSON in file path semantically (key
// order and whitespace are irrelevant, numbers must be spelled alike).
// accept lists differences from the golden file that are expected: JSON
// pointer → the value got has there instead, or Absent (each one a deliberate,
// documented change; the golden file itself stays as recorded). With
// update, the file is (re)written from got instead, indented with sorted
// keys.
func GoldenJSON(t testing.TB, path string, got []byte, accept map[string]any, update bool) {
	t.Helper()
	g, err := canonical(got)
	if err != nil {
		t.Fatalf("%s: the body is not JSON: %v\n%s", path, err, got)
	}
	if update {
		var out bytes.Buffer
		e := json.NewEncoder(&out)
		e.SetEscapeHTML(false)
		e.SetIndent("", "  ")
		if err := e.Encode(g); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v", err)
	}
	want, err := canonical(raw)
	if err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	for p, v := range accept {
		if err := setPointer(want, p, v); err != nil {
			t.Fatalf("%s: accepted difference: %v", path, err)
		}
	}
	if !reflect.DeepEqual(g, want) {
		w, _ := json.MarshalIndent(want, "", "  ")
		o, _ := json.MarshalIndent(g, "", "  ")
		t.Fatalf("%s: the request body drifted from the golden file\nwant:\n%s\ngot:\n%s", path, w, o)
	}
}
