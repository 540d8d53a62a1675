package providertest

import (
	"os"
	"path/filepath"
	"strings"
)

// Recording makes a 200 script of a recorded response body, served byte
// for byte: a .json file as one application/json body (a server that
// ignored "stream": true), any other file as an event stream flushed one
// event (up to and including its blank line) at a time, so a body that
// does not end in a blank line ends exactly as recorded.
func Recording(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	body := string(data)
	if filepath.Ext(path) == ".json" {
		return Script{Header: map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_5e2d9a1c44", "Request-Id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
			Chunks: []string{body}}, nil
	}
	var chunks []string
	for {
		i := strings.Index(body, "\n\n")
		if i < 0 {
			break
		}
		chunks, body = append(chunks, body[:i+2]), body[i+2:]
	}
	if body != "" {
		chunks = append(chunks, body)
	}
	return Script{Header: map[string]string{"Content-Type": "text/event-stream; charset=utf-8", "X-Request-Id": "req_5e2d9a1c44", "Request-Id": "req_011CSHoEeqs5C35K2UUqR7Fy", "Cache-Control": "no-cache"},
		Chunks: chunks}, nil
}
