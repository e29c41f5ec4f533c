//go:build tools

// Package tools pins the OpenTofu module this wrapper builds. The build
// tag keeps it out of every normal build; `go build` names the packages itself.
package tools
