package manifests

import (
	"encoding/json"
	"os"
	"testing"

	"gopkg.in/yaml.v3"
)

// BenchmarkParse measures a full Parse (YAML, validation, three JSON Schema
// compilations) of the tool-fs example against plain yaml.Unmarshal of the
// same bytes, the floor any YAML-based manifest loader pays.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/valid/tool-fs/plugin.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline-yaml-unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v map[string]any
			if err := yaml.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse("plugin.yaml", data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkValidateArgs measures checking one tool call's arguments against
// the compiled schema, against json.Unmarshal of the same arguments.
func BenchmarkValidateArgs(b *testing.B) {
	m, err := Load("testdata/valid/tool-fs")
	if err != nil {
		b.Fatal(err)
	}
	tl, _ := m.Tool("fs.write")
	args := []byte(`{"path": "src/main.go", "content": "package main\n\nfunc main() {}\n", "mode": "overwrite"}`)
	b.Run("baseline-json-unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(args, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := tl.ValidateArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
