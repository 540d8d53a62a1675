// Command fixturepolicy is a policy-extension plugin for tests. Like
// internal/fixtureplugin it picks its behaviour from the name it runs
// under: good (denies writes under secret/, abstains otherwise), crash
// (panics on any evaluation), hang (never answers), bad (answers "maybe").
//
// It must never be shipped: it lives under internal/ and is built only by tests.
package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

type ext struct{ mode string }

func (e ext) Info() base.Info {
	return base.Info{Name: "ext-" + e.mode, Kind: base.KindPolicy, Version: "1.0.0", APIVersions: []int{1, 2}}
}
func (ext) Configure(context.Context, base.Config, base.KernelClient) error { return nil }
func (ext) Health(context.Context) error                                    { return nil }

func (e ext) Evaluate(_ context.Context, r policyext.Request) (policyext.Decision, error) {
	if r.Syscall == "policy.warmup" { // policy.WarmupSyscall
		return policyext.Decision{Decision: policyext.Pass}, nil
	}
	switch e.mode {
	case "crash":
		panic("fixture policy crashes")
	case "hang":
		time.Sleep(time.Hour)
	case "bad":
		return policyext.Decision{Decision: "maybe"}, nil
	}
	if r.Syscall == "fs.write" && strings.HasPrefix(r.Path, "secret/") {
		return policyext.Decision{Decision: policyext.Deny, Reason: "extension: secret/ is off limits", Rule: "no-secret-writes"}, nil
	}
	return policyext.Decision{Decision: policyext.Pass}, nil
}

func main() {
	name := filepath.Base(os.Args[0])
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	pluginsdk.ServePolicy(ext{mode: name})
}
