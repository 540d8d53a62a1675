package router

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// CodeChangeRefused: a plugin proposed a change of a path no plugin may
// write (outside the project, .git/, .fluffy/) or the policy denies.
const CodeChangeRefused = "TOOL_CHANGE_REFUSED"

// judgeChanges puts every path a plugin reports as changed through the
// one validation, whoever called the tool and whether or not a changeset
// takes the changes: confinement to the project, never .git/ or .fluffy/,
// and the policy's fs.write for this plugin.
// Each judged path is a syscall record; any refusal refuses the call, so
// no refused path is ever shown or taken as a proposal.
func (r *Router) judgeChanges(ctx context.Context, cs *callState, changes []tool.FileChange) *uerr.Error {
	if len(changes) == 0 {
		return nil
	}
	state := ""
	if cs.sess.Gate != nil {
		state = cs.sess.Gate.State()
	}
	base := Requests(cs.target, cs.sess, state, nil)[0].Request
	var refused []string
	for _, ch := range changes {
		shown := textsafe.Line(ch.Path, 200)
		rel, err := confine.Writable(ch.Path)
		if err == nil && strings.ContainsFunc(ch.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			err = uerr.New(confine.CodeInvalid, "the path has control characters", "", "")
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s (%s)", shown, uerr.From(err).What))
			continue
		}
		// A deletion is judged as a write, as the changeset judges it.
		req := base
		req.Syscall, req.Path = "fs.write", rel
		j := Judged{Request: req, Arg: "change"}
		t0 := r.o.Now()
		j.Result = r.o.Policy.Evaluate(ctx, req)
		j.Duration = r.o.Now().Sub(t0)
		r.recordSyscall(ctx, cs, j)
		if j.Result.Enforced == policy.Deny {
			why := strings.Join(j.Result.Reasons, "; ")
			if rule := j.Result.DecidingRule(); rule != "" {
				why += " (rule " + rule + ")"
			}
			refused = append(refused, fmt.Sprintf("%s (%s denied: %s)", shown, req.Syscall, why))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return uerr.New(CodeChangeRefused, fmt.Sprintf("tool %s of %s proposed changes the kernel refuses: %s", cs.call.Tool, cs.target.Plugin, strings.Join(refused, "; ")),
		"every path a plugin reports as changed is judged like a write: inside the project, never .git/ or .fluffy/, and allowed by the policy; nothing of this call was taken or proposed",
		"report this to the plugin's author; to see a policy decision, run `fluffy policy explain --syscall fs.write --path PATH --caller "+cs.target.Plugin+"`")
}
