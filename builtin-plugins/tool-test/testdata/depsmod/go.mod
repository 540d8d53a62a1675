module example.com/depsmod

go 1.26.0

require (
	github.com/hashicorp/go-hclog v1.6.3
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/fatih/color v1.13.0 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
