package providertest

import "github.com/fluffy-waffle/fluffy/plugins/provider"

// OpenAITurns is what the Chat Completions API streams for the given model
// turns (each a turn's provider events, as a cassette holds them), byte for
// byte as the service sends them: one scripted response a turn, the
// arguments of each call in the fragments the events carry.
func OpenAITurns(turns [][]provider.Event) []Script {
	out := make([]Script, 0, len(turns))
	for _, events := range turns {
		ev := []string{OpenAIRole}
		idx := map[string]int{}
		finish := "stop"
		var in, outTok int64
		for _, e := range events {
			switch {
			case e.TextDelta != "":
				ev = append(ev, OpenAIText(e.TextDelta))
			case e.ToolCallStart != nil:
				i := len(idx)
				idx[e.ToolCallStart.CallID] = i
				ev = append(ev, OpenAICallStart(i, "call_"+e.ToolCallStart.CallID, e.ToolCallStart.Name))
				finish = "tool_calls"
			case e.ToolCallDelta != nil:
				ev = append(ev, OpenAICallArgs(idx[e.ToolCallDelta.CallID], e.ToolCallDelta.ArgumentsDelta))
			case e.Usage != nil:
				in, outTok = e.Usage.InputTokens, e.Usage.OutputTokens
			}
		}
		ev = append(ev, OpenAIFinish(finish), OpenAIUsageChunk(int(in), int(outTok), 0, 0), OpenAIDone)
		out = append(out, Stream(97, ev...))
	}
	return out
}
