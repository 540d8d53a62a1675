package scheduler

import (
	"fmt"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Templates with a configurable limit (config keys scheduler.per_template.<name>).
var configTemplates = []string{"ai-provider", "code-executor", "policy-sandbox"}

// ConfigFrom reads the scheduler.* settings (flags > FLUFFY_* > project >
// user > defaults, resolved by host/config) into a Config.
func ConfigFrom(c *config.Config) (Config, error) {
	cfg := DefaultConfig()
	cfg.GlobalMax = c.Int("scheduler.global_max")
	for _, t := range configTemplates {
		cfg.PerTemplate[t] = c.Int("scheduler.per_template." + t)
	}
	cfg.AgeThreshold = c.Duration("scheduler.age_threshold")
	check := map[string]int{"scheduler.global_max": cfg.GlobalMax}
	for _, t := range configTemplates {
		check["scheduler.per_template."+t] = cfg.PerTemplate[t]
	}
	for k, n := range check {
		if n < 1 {
			v := c.Get(k)
			return cfg, uerr.New(CodeBadConfig, fmt.Sprintf("%s is %d", k, n), "a concurrency limit of 0 would never run anything", "set it to 1 or more").
				WithContext("set by %s", v.Origin)
		}
	}
	if cfg.AgeThreshold <= 0 {
		return cfg, uerr.New(CodeBadConfig, "scheduler.age_threshold must be positive", "it is how long a task waits before its priority is raised", "write e.g. 30s")
	}
	return cfg, nil
}
