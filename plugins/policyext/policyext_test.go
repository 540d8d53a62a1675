package policyext

import (
	"context"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
)

type ext struct{}

func (ext) Info() base.Info {
	return base.Info{Name: "ext", Kind: base.KindPolicy, Version: "1.0.0", APIVersions: []int{1, 2}}
}
func (ext) Configure(context.Context, base.Config, base.KernelClient) error { return nil }
func (ext) Health(context.Context) error                                    { return nil }
func (ext) Evaluate(_ context.Context, r Request) (Decision, error) {
	switch r.Path {
	case "bad":
		return Decision{Decision: "maybe"}, nil
	case "err":
		return Decision{}, uerr.New("EXT_FAIL", "x", "y", "z")
	}
	return Decision{Decision: Deny, Reason: "no " + r.Syscall, Rule: "r1"}, nil
}

func TestEvaluate(t *testing.T) {
	for _, v := range []int{1, 2} {
		c, _ := plugin.TestPluginGRPCConn(t, false, PluginSets(ext{}, []int{v})[v])
		raw, _ := c.Dispense(PluginName)
		cl := raw.(Client)
		d, err := cl.Evaluate(context.Background(), Request{Syscall: "fs.write", Path: "a"})
		if err != nil || d.Decision != Deny || d.Reason != "no fs.write" || d.Rule != "r1" {
			t.Fatalf("v%d: %+v %v", v, d, err)
		}
		if _, err := cl.Evaluate(context.Background(), Request{Path: "bad"}); !uerr.HasCode(err, base.CodeMalformed) {
			t.Fatalf("v%d malformed decision: %v", v, err)
		}
		if _, err := cl.Evaluate(context.Background(), Request{Path: "err"}); !uerr.HasPluginCode(err, "EXT_FAIL") {
			t.Fatalf("v%d error: %v", v, err)
		}
		c.Close()
	}
}
