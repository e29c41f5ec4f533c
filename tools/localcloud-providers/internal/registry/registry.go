// Package registry is where each local provider announces itself: the binary serves the provider whose
// registry type name its own file name carries (terraform-provider-<type>_v<version>), as Terraform and
// OpenTofu start a provider from a filesystem mirror.
package registry

import (
	"fmt"
	"io/fs"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/provider"

	"github.com/npa-pulumi/localcloud-providers/internal/generic"
	"github.com/npa-pulumi/localcloud-providers/internal/spec"
)

// Entry is one provider address the local cloud serves.
type Entry struct {
	// Namespace and Type of the registry address (hostname aside): "nebius"/"nebius", "hashicorp"/"helm".
	Namespace string
	Type      string
	// Version is the release whose documented schema the local provider implements; it satisfies every
	// version constraint upstream k8s-training writes for this address.
	Version string
	// Hostnames under which the mirror lays the provider out (registry.terraform.io and
	// registry.opentofu.org for registry sources; a provider mirror's own host for those).
	Hostnames []string
	New       func(version string) provider.Provider
}

var entries = map[string]Entry{}

// Register adds a provider; the key is the binary name's type part.
func Register(e Entry) { entries[e.Namespace+"/"+e.Type] = e }

// ByType finds the provider whose type the binary's name carries.
func ByType(typeName string) (Entry, bool) {
	for _, e := range entries {
		if e.Type == typeName {
			return e, true
		}
	}
	return Entry{}, false
}

// All lists the providers, sorted by namespace/type.
func All() []Entry {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Entry, 0, len(keys))
	for _, k := range keys {
		out = append(out, entries[k])
	}
	return out
}

// Load registers a provider for every schema file in fsys (the embedded schemas/*.json).
func Load(fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return err
	}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		f, err := spec.Parse(data)
		if err != nil {
			return fmt.Errorf("schemas/%s: %w", name, err)
		}
		key := f.Namespace + "/" + f.Type
		if _, dup := entries[key]; dup {
			return fmt.Errorf("schemas/%s: %s is declared twice", name, key)
		}
		Register(Entry{Namespace: f.Namespace, Type: f.Type, Version: f.Version, Hostnames: f.Hostnames,
			New: generic.New(f)})
	}
	return nil
}
