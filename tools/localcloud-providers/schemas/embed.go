// Package schemas embeds every provider's schema file (PROTOCOL.md): a new file is a new provider.
package schemas

import "embed"

// Files holds <namespace>-<type>.json for every provider the local cloud serves.
//
//go:embed *.json
var Files embed.FS
