//go:build tools

// Package tools keeps SeaweedFS's `weed` command in this wrapper's module graph. `go install
// .../weed@version` refuses the module (its go.mod has a replace), so the pin is required here and built
// with `go build` from this directory. The build tag keeps the file out of every normal build.
package tools

import (
	_ "github.com/seaweedfs/seaweedfs/weed"
)
