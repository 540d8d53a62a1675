package manifests

import (
	"encoding/json"
	"fmt"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// NewTool builds a Tool the kernel serves itself (no manifest): the same
// schema compilation and argument validation as a manifest's tool, so a
// kernel tool's arguments are judged by the one mechanism every tool call
// goes through.
func NewTool(name, summary string, paramsJSON []byte) (Tool, error) {
	var doc any
	if err := json.Unmarshal(paramsJSON, &doc); err != nil {
		return Tool{}, uerr.Wrap(err, CodeBadSchema, fmt.Sprintf("kernel tool %s: parameters are not JSON", name), err.Error(), "fix the kernel tool's schema")
	}
	canon, _ := json.Marshal(doc) // canonical: object keys sorted
	sch, msg, ptr, fix := compileSchema(newCompiler(), 0, canon)
	if sch == nil {
		return Tool{}, uerr.New(CodeBadSchema, fmt.Sprintf("kernel tool %s: %s", name, msg), "at "+ptr, fix)
	}
	return Tool{Name: name, Summary: summary, OutputMode: OutputFull, Lifetime: LifetimeSession, ParametersJSON: canon, schema: sch}, nil
}
