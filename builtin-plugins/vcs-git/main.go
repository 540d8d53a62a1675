package main

import (
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// version is stamped by the build; it must match plugin.yaml.
const version = "0.1.0"

func main() {
	pluginsdk.ServeVCS(newGitVCS(pluginsdk.NewLogger("vcs-git")))
}
