package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"iter"
)

// reportLines yields every line of a runner's JSON-lines report (lines up
// to 16 MiB) with its decoding as a T, or nil when the line is not a JSON
// object (build output, a crash message), which callers keep as text.
func reportLines[T any](stream []byte) iter.Seq2[[]byte, *T] {
	return func(yield func([]byte, *T) bool) {
		sc := bufio.NewScanner(bytes.NewReader(stream))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			v := new(T)
			if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, v) != nil {
				v = nil
			}
			if !yield(line, v) {
				return
			}
		}
	}
}
