// Package depsmod reads a YAML service list and logs what it loaded: a
// small module with real dependencies for test.run's benchmarks.
package depsmod

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"gopkg.in/yaml.v3"
)

// Service is one entry of the list.
type Service struct {
	Name string `yaml:"name"`
	Port int    `yaml:"port"`
}

// Load parses the list and logs each service to log.
func Load(data []byte, log hclog.Logger) ([]Service, error) {
	var s []Service
	if err := yaml.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	for _, v := range s {
		if v.Port <= 0 || v.Port > 65535 {
			return nil, fmt.Errorf("service %s: port %d out of range", v.Name, v.Port)
		}
		log.Info("service", "name", v.Name, "port", v.Port)
	}
	return s, nil
}

// Dump writes the list back as YAML.
func Dump(s []Service) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}
