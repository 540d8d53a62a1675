package agent

// SystemPrompt is the system prompt the next request would carry, for a
// person to read (`fluffy prompt show`, /prompt), and its estimated size
// in tokens.
func (a *Agent) SystemPrompt() (string, int64) {
	s := a.systemPrompt(a.o.Workflow.Status(), a.o.Tools.List())
	return s, a.est.text(s)
}
