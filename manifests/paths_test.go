package manifests

import (
	"fmt"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

const pathsManifest = `name: tool-demo
version: "1.0.0"
kind: tool
description: "demo"
author: "tests"
entry: bin/tool-demo
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
required_capabilities: [fs.read, fs.list, fs.write]
tools:
  - name: demo.edit
    summary: "edit files"
    parameters:
      type: object
      properties:
        dir: {type: string}
        read: {type: array, items: {type: string}}
        edits: {type: array, items: {type: object, properties: {path: {type: string}}}}
    paths:
      - {arg: dir, access: read, syscall: fs.list, default: "."}
      - {arg: "read[]", access: read}
      - {arg: "edits[].path", access: write}
`

func TestPathArgs(t *testing.T) {
	m, err := Parse("plugin.yaml", []byte(pathsManifest))
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := m.Tool("demo.edit")
	for _, c := range []struct {
		args string
		want string // fmt of []PathArg values
		code string
	}{
		{`{}`, `[{dir . fs.list false true}]`, ""},
		{`{"dir":"src"}`, `[{dir src fs.list false false}]`, ""},
		{`{"read":["a","b"],"edits":[{"path":"c"},{}]}`, `[{dir . fs.list false true} {read[0] a fs.read false false} {read[1] b fs.read false false} {edits[0].path c fs.write true false}]`, ""},
		{`{"dir":5}`, "", CodeToolArgsInvalid},
		{`{"read":"a"}`, "", CodeToolArgsInvalid},
		{`{"edits":[{"path":["x"]}]}`, "", CodeToolArgsInvalid},
		{`[1]`, "", CodeToolArgsInvalid},
	} {
		got, err := tl.PathArgs([]byte(c.args))
		if c.code != "" {
			if !uerr.HasCode(err, c.code) {
				t.Errorf("%s: err %v, want %s", c.args, err, c.code)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("%s: got %v %v\nwant %s", c.args, got, err, c.want)
		}
	}
}
