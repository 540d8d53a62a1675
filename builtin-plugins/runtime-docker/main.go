package main

import (
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

func main() {
	pluginsdk.ServeRuntime(newAdapter())
}
