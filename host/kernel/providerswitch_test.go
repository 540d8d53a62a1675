//go:build !race

package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// TestTaskSwitchesProviderConfiguration: tasks of one Tasks bring their
// own provider configuration. The first task runs on the one the kernel
// was opened with; the next, naming another base URL (another port: the
// proxy must now allow it), key and model, reaches only the second fake;
// a task without a configuration goes on with the last one; a task on a
// kernel opened without a provider and naming none says so.
func TestTaskSwitchesProviderConfiguration(t *testing.T) {
	a, b := providertest.New(), providertest.New()
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	reply := providertest.Stream(0, providertest.OpenAIRole, providertest.OpenAIText("hi"), providertest.OpenAIFinish("stop"), providertest.OpenAIUsageChunk(9, 1, 0, 0), providertest.OpenAIDone)
	a.Play(reply)
	b.Play(reply)
	cfg := func(srv *providertest.Server, key, model string) []byte {
		c, _ := json.Marshal(map[string]string{"base_url": srv.URL() + "/v1", "api_key": key, "model": model})
		return c
	}
	_, tasks, _ := providerKernel(t, "provider-openai", "model-a", cfg(a, "sk-test-key-aaaaaaaa", "model-a"))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := func(req task.Request) {
		t.Helper()
		var ev events
		req.Prompt, req.Yes = "say hi", true
		if _, err := tasks.Run(ctx, req, ev.add); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct {
		srv         *providertest.Server
		model, auth string
	}
	check := func(step string, want seen, other *providertest.Server, otherBefore int) {
		t.Helper()
		reqs := want.srv.Requests()
		if len(reqs) == 0 {
			t.Fatalf("%s: the fake got no request", step)
		}
		last := reqs[len(reqs)-1]
		var body struct{ Model string }
		_ = json.Unmarshal(last.Body, &body)
		if body.Model != want.model || last.Header.Get("Authorization") != "Bearer "+want.auth {
			t.Fatalf("%s: model %q auth %q, want %q and key %s", step, body.Model, last.Header.Get("Authorization"), want.model, want.auth)
		}
		if n := len(other.Requests()); n != otherBefore {
			t.Fatalf("%s: the other fake got %d more request(s)", step, n-otherBefore)
		}
	}
	run(task.Request{})
	check("the kernel's configuration", seen{a, "model-a", "sk-test-key-aaaaaaaa"}, b, 0)
	na := len(a.Requests())
	run(task.Request{Provider: "provider-openai", Model: "model-b", ProviderConfig: cfg(b, "sk-test-key-bbbbbbbb", "model-b")})
	check("the task's configuration", seen{b, "model-b", "sk-test-key-bbbbbbbb"}, a, na)
	nb := len(b.Requests())
	run(task.Request{Provider: "provider-openai", Model: "model-b"})
	if len(b.Requests()) == nb {
		t.Fatal("a task without a configuration did not go on with the last one")
	}
	check("no configuration", seen{b, "model-b", "sk-test-key-bbbbbbbb"}, a, na)
}

// TestTaskWithoutAnyProviderSaysSo: tasks open without a configured
// provider (a task may bring its own); one that names none is refused
// with TASK_NO_PROVIDER before anything runs.
func TestTaskWithoutAnyProviderSaysSo(t *testing.T) {
	data, err := os.ReadFile("../../examples/cassettes/parseconfig.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := json.Marshal(map[string]string{"cassette": string(data)})
	_, tasks, _ := projectKernel(t, "../../examples/parseconfig", "provider-replay", "", c, func(o *task.Options) { o.Provider, o.Model = "", "" })
	_, err = tasks.Run(context.Background(), task.Request{Prompt: "say hi", Yes: true}, func(agent.Event) {})
	if !uerr.HasCode(err, task.CodeNoProvider) || !strings.Contains(uerr.From(err).Fix, "fluffy init") {
		t.Fatalf("a task with no provider anywhere: %v", err)
	}
	_, err = tasks.Run(context.Background(), task.Request{Prompt: "say hi", Yes: true, Provider: "provider-nonesuch"}, func(agent.Event) {})
	if !uerr.HasCode(err, task.CodeNoProvider) {
		t.Fatalf("a task naming an unloaded provider: %v", err)
	}
}
