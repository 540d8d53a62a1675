//go:build !race

package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// TestPersistentOverloadIsNotRetriedTwice: an upstream that answers every
// request with 529 (then 503) reaches the agent loop through the real
// provider-openai plugin in its container. The plugin retries twice
// (1 + 2 requests) and says its retries are spent; the agent loop does not
// repeat the turn on top of that, so the fake sees 3 requests, not the
// 12 of both loops multiplied (3 per plugin call × 4 agent attempts). The
// failure the user sees is still the retryable overload.
func TestPersistentOverloadIsNotRetriedTwice(t *testing.T) {
	srv := providertest.New()
	t.Cleanup(srv.Close)
	srv.Play(
		providertest.OpenAIError(529, "server_error", "overloaded", "The server is overloaded", nil),
		providertest.OpenAIError(503, "server_error", "", "Service Unavailable", nil),
	)
	cfg, _ := json.Marshal(map[string]any{"base_url": srv.URL() + "/v1", "api_key": "sk-test-not-a-real-key", "model": "gpt-4.1",
		"retry": map[string]int{"initial_ms": 20, "max_ms": 50}})
	_, tasks, _ := providerKernel(t, "provider-openai", "gpt-4.1", cfg)
	var ev events
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done, err := tasks.Run(ctx, task.Request{Prompt: "add error handling to parseConfig", Yes: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("the failing upstream received %d requests for one turn, want 3 (1 + the plugin's 2 retries)", n)
	}
	if done.Status != agent.StatusFailed || !strings.Contains(done.Reason, "overloaded") || !strings.Contains(done.Reason, "sent the request 3 times; try again later") {
		t.Fatalf("task ended %s: %s", done.Status, done.Reason)
	}
	var errs []string
	ev.mu.Lock()
	for _, e := range ev.all {
		if e.Type == agent.EventError && e.Error != nil {
			errs = append(errs, e.Error.FullCode())
		}
	}
	ev.mu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0], provider.CodeOverloaded) {
		t.Fatalf("error events %v, want the one overload that ended the task", errs)
	}
}
