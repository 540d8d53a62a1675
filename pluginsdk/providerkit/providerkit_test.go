package providerkit

import (
	"context"
	"errors"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

type conf struct{ model, key string }

func (c conf) String() string { return "model=" + c.model } // never the key

func parse(raw []byte) (conf, error) {
	if string(raw) == "bad" {
		return conf{}, errors.New("bad config")
	}
	return conf{model: "m-default", key: string(raw)}, nil
}

// Base: identity, a config error before Configure, the parsed config after,
// a parse failure returned as is.
func TestBaseConfigure(t *testing.T) {
	b := New("provider-x", "1.2.3", nil, parse)
	if i := b.Info(); i.Name != "provider-x" || i.Kind != base.KindProvider || i.Version != "1.2.3" || len(i.APIVersions) == 0 {
		t.Fatalf("info %+v", i)
	}
	if _, err := b.Config(); !uerr.HasCode(err, provider.CodeConfig) {
		t.Fatalf("config before Configure: %v, want %s", err, provider.CodeConfig)
	}
	if err := b.Configure(context.Background(), base.Config{ConfigJSON: []byte("bad")}, nil); err == nil {
		t.Fatal("a bad config was accepted")
	}
	if err := b.Configure(context.Background(), base.Config{ConfigJSON: []byte("k")}, nil); err != nil {
		t.Fatal(err)
	}
	if c, err := b.Config(); err != nil || c.key != "k" {
		t.Fatalf("config %+v %v", c, err)
	}
}

// Chat: the request's model or the default, one encoding for every
// attempt, a fresh stream each, no retry once output was delivered, and
// ctx's error once ctx is done.
func TestChatTurn(t *testing.T) {
	for _, c := range []struct {
		name      string
		reqModel  string
		wantModel string
		fails     int  // attempts that fail before one succeeds
		deliver   bool // the failing attempts deliver text first
		wantTries int
		wantErr   bool
		cancelled bool
	}{
		{name: "default model", wantModel: "m-default", wantTries: 1},
		{name: "request model", reqModel: "m-req", wantModel: "m-req", wantTries: 1},
		{name: "retried before output", wantModel: "m-default", fails: 2, wantTries: 3},
		{name: "not retried after output", wantModel: "m-default", fails: 2, deliver: true, wantTries: 1, wantErr: true},
		{name: "cancelled", wantModel: "m-default", fails: 1, wantTries: 1, wantErr: true, cancelled: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			encoded, tries := 0, 0
			var model string
			err := Chat(ctx, provider.ChatRequest{Model: c.reqModel}, func(provider.Event) error { return nil }, Turn{
				Model: "m-default",
				Encode: func(m string, _ *provider.ToolNames) ([]byte, error) {
					encoded++
					model = m
					return []byte("body"), nil
				},
				Attempt: func(_ context.Context, body []byte, s *provider.Stream) error {
					tries++
					if s.Delivered() || string(body) != "body" {
						t.Fatal("an attempt got a used stream or another body")
					}
					if tries <= c.fails {
						if c.deliver {
							_ = s.Text("partial")
						}
						if c.cancelled {
							cancel()
						}
						return errors.New("upstream failed")
					}
					return nil
				},
				Retry: func(ctx context.Context, attempt func() (bool, error)) error {
					for {
						delivered, err := attempt()
						if err == nil || delivered || ctx.Err() != nil {
							return err
						}
					}
				},
			})
			if (err != nil) != c.wantErr || tries != c.wantTries || encoded != 1 || model != c.wantModel {
				t.Fatalf("err %v, %d tries, %d encodings, model %q", err, tries, encoded, model)
			}
			if c.cancelled && !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want ctx's", err)
			}
		})
	}
}
