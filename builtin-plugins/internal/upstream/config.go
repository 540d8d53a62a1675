package upstream

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Config is a network provider's Configure JSON.
type Config struct {
	// BaseURL of the API (https://api.openai.com/v1, https://api.anthropic.com).
	BaseURL string `json:"base_url"`
	// APIKey is sent as the provider's auth header; never logged.
	APIKey string `json:"api_key,omitempty"`
	// Model is used when a request names none.
	Model string `json:"model,omitempty"`
	// Retry tunes the plugin's retries (defaults when absent).
	Retry RetryConfig `json:"retry,omitempty"`
}

// String describes the config without the key.
func (c Config) String() string {
	k := "none"
	if c.APIKey != "" {
		k = "set"
	}
	return fmt.Sprintf("base_url=%s model=%s api_key=%s", c.BaseURL, c.Model, k)
}

// ParseConfig reads and checks a Configure JSON; plugin names the plugin
// and defaultURL is used when base_url is empty.
func ParseConfig(raw []byte, plugin, defaultURL string) (Config, error) {
	var c Config
	bad := func(why string) error {
		return uerr.New(provider.CodeConfig, plugin+" cannot start with its configuration", why,
			"set providers.<name>.base_url to an http(s) URL (docs/providers.md)")
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return c, bad("the configuration is not JSON: " + err.Error())
		}
	}
	if c.BaseURL == "" {
		c.BaseURL = defaultURL
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, bad(fmt.Sprintf("base_url %.200q is not an http(s) URL", c.BaseURL))
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		return c, bad("the API key contains a line break")
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c, nil
}

// Parser is ParseConfig for plugin as a provider skeleton's parse step:
// defaultURL when base_url is empty, defaultModel when model is.
func Parser(plugin, defaultURL, defaultModel string) func(raw []byte) (Config, error) {
	return func(raw []byte) (Config, error) {
		c, err := ParseConfig(raw, plugin, defaultURL)
		if err == nil && c.Model == "" {
			c.Model = defaultModel
		}
		return c, err
	}
}
