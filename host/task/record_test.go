package task

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

func TestRecorderWritesFinishedTurnsWithoutSecrets(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	secrets := ConfigSecrets(map[string][]byte{
		"provider-openai": []byte(`{"base_url":"http://x/v1","api_key":"` + key + `","model":"m"}`),
		"other":           []byte(`{"nested":{"auth_token":"tok-ABCDEFGH"},"short_key":"abc"}`),
	})
	if len(secrets) != 2 || secrets[0] != key || secrets[1] != "tok-ABCDEFGH" {
		t.Fatalf("secrets = %q", secrets)
	}
	rec := newRecorder(secrets)
	req := provider.ChatRequest{Messages: []provider.Message{{Role: provider.RoleUser, Content: "task"}}}
	done := provider.Event{Done: &provider.Done{StopReason: provider.StopEndTurn}}
	// A model that echoes the key (it should never see it) still does not
	// put it into the cassette.
	leak := []provider.Event{{TextDelta: "the key is " + key + " and tok-ABCDEFGH"}, done}
	line, err := rec.turn(req, leak)
	if err != nil || line == nil {
		t.Fatalf("turn: %q %v", line, err)
	}
	if bytes.Contains(line, []byte(key)) || bytes.Contains(line, []byte("tok-ABCDEFGH")) || !bytes.Contains(line, []byte(redacted)) {
		t.Fatalf("secret in the cassette line: %s", line)
	}
	// A turn that ended in an error (retried by the loop) or was cut off
	// is not a turn of the conversation.
	for _, evs := range [][]provider.Event{
		{{TextDelta: "cut"}},
		{{TextDelta: "x"}, {Err: nil, Done: nil, Usage: &provider.Usage{InputTokens: 1}}},
		nil,
	} {
		if l, err := rec.turn(req, evs); l != nil || err != nil {
			t.Fatalf("unfinished turn recorded: %s %v", l, err)
		}
	}
	req2 := req
	req2.Messages = append(append([]provider.Message(nil), req.Messages...), provider.Message{Role: provider.RoleAssistant, Content: "x"}, provider.Message{Role: provider.RoleUser, Content: "more"})
	line2, err := rec.turn(req2, []provider.Event{{TextDelta: "ok"}, done})
	if err != nil {
		t.Fatal(err)
	}
	// The lines form a cassette that replays: turns 1 and 2, matched by
	// request.
	c, err := cassette.Parse(strings.NewReader(string(line) + "\n" + string(line2) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr, err := c.Match(req2); err != nil || tr.Turn != 2 || tr.Events[0].TextDelta != "ok" {
		t.Fatalf("match turn 2: %+v %v", tr, err)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil || obj["request_sha256"] == nil {
		t.Fatalf("line 1 has no request hash: %s", line)
	}
}
