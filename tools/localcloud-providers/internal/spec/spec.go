// Package spec reads a provider's schema file (PROTOCOL.md, "Schema files") and builds the framework
// schema and the Terraform value types from it, so that a new provider is a new JSON file and no Go.
package spec

import (
	"encoding/json"
	"fmt"
	"sort"
)

// DefaultHostnames are the registry hosts a provider of the public registry is mirrored under.
var DefaultHostnames = []string{"registry.terraform.io", "registry.opentofu.org"}

// File is one schemas/<namespace>-<type>.json.
type File struct {
	Namespace          string            `json:"namespace"`
	Type               string            `json:"type"`
	Version            string            `json:"version"`
	Hostnames          []string          `json:"hostnames"`
	Functions          []string          `json:"functions"`
	Provider           *Block            `json:"provider"`
	Resources          map[string]*Block `json:"resources"`
	DataSources        map[string]*Block `json:"data_sources"`
	EphemeralResources map[string]*Block `json:"ephemeral_resources"`
}

// Block is an attribute tree: a resource's top level, a nested attribute's object, or a block's body.
type Block struct {
	Attributes map[string]*Attribute   `json:"attributes"`
	Blocks     map[string]*NestedBlock `json:"blocks"`
}

// NestedBlock is an SDKv2-style block (kubernetes' `metadata {}`).
type NestedBlock struct {
	Block
	Nesting  string `json:"nesting"`
	MinItems int    `json:"min_items"`
	MaxItems int    `json:"max_items"`
}

// Attribute is either typed (`type`) or nested (`nested` + `attributes`), with the flags of PROTOCOL.md.
type Attribute struct {
	Type       *Type                 `json:"type"`
	Nested     string                `json:"nested"`
	Attributes map[string]*Attribute `json:"attributes"`
	Required   bool                  `json:"required"`
	Optional   bool                  `json:"optional"`
	Computed   bool                  `json:"computed"`
	Sensitive  bool                  `json:"sensitive"`
	WriteOnly  bool                  `json:"write_only"`
	Replace    bool                  `json:"replace"`
	Keep       bool                  `json:"keep"`
}

// Kind is a Terraform type's constructor.
type Kind string

const (
	String  Kind = "string"
	Number  Kind = "number"
	Bool    Kind = "bool"
	Dynamic Kind = "dynamic"
	List    Kind = "list"
	Set     Kind = "set"
	Map     Kind = "map"
	Object  Kind = "object"
)

// Type is `"string"`, `{"list": T}`, `{"object": {name: T}}`…
type Type struct {
	Kind   Kind
	Elem   *Type
	Fields map[string]*Type
}

// UnmarshalJSON reads the compact type notation.
func (t *Type) UnmarshalJSON(data []byte) error {
	var name string
	if err := json.Unmarshal(data, &name); err == nil {
		switch Kind(name) {
		case String, Number, Bool, Dynamic:
			t.Kind = Kind(name)
			return nil
		}
		return fmt.Errorf("unknown type %q (string, number, bool, dynamic, or {list|set|map|object: ...})", name)
	}
	var ctor map[string]json.RawMessage
	if err := json.Unmarshal(data, &ctor); err != nil || len(ctor) != 1 {
		return fmt.Errorf("a type is a name or an object with one key (list, set, map, object): %s", data)
	}
	for key, body := range ctor {
		switch Kind(key) {
		case List, Set, Map:
			t.Kind, t.Elem = Kind(key), &Type{}
			return json.Unmarshal(body, t.Elem)
		case Object:
			t.Kind = Object
			return json.Unmarshal(body, &t.Fields)
		}
		return fmt.Errorf("unknown type constructor %q", key)
	}
	return nil
}

// Parse reads a schema file and checks what the framework would otherwise reject late.
func Parse(data []byte) (*File, error) {
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Namespace == "" || f.Type == "" || f.Version == "" {
		return nil, fmt.Errorf("namespace, type and version are required")
	}
	if len(f.Hostnames) == 0 {
		f.Hostnames = DefaultHostnames
	}
	for _, group := range []map[string]*Block{f.Resources, f.DataSources, f.EphemeralResources} {
		for _, name := range sortedKeys(group) {
			if err := group[name].check(name); err != nil {
				return nil, err
			}
		}
	}
	if f.Provider != nil {
		if err := f.Provider.check("provider"); err != nil {
			return nil, err
		}
	}
	return &f, nil
}

func (b *Block) check(where string) error {
	if b == nil {
		return fmt.Errorf("%s: empty", where)
	}
	for _, name := range sortedKeys(b.Attributes) {
		if err := b.Attributes[name].check(where + "." + name); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(b.Blocks) {
		nb := b.Blocks[name]
		switch nb.Nesting {
		case "list", "set", "single":
		default:
			return fmt.Errorf("%s.%s: nesting %q (list, set, single)", where, name, nb.Nesting)
		}
		if err := nb.Block.check(where + "." + name); err != nil {
			return err
		}
	}
	return nil
}

func (a *Attribute) check(where string) error {
	if a == nil {
		return fmt.Errorf("%s: empty", where)
	}
	if (a.Type == nil) == (a.Nested == "") {
		return fmt.Errorf("%s: exactly one of type and nested", where)
	}
	if !a.Required && !a.Optional && !a.Computed {
		return fmt.Errorf("%s: one of required, optional, computed", where)
	}
	if a.WriteOnly && a.Computed {
		return fmt.Errorf("%s: write_only cannot be computed", where)
	}
	if a.WriteOnly && (a.Nested == "set" || (a.Type != nil && a.Type.Kind == Set)) {
		return fmt.Errorf("%s: a set cannot be write_only (Terraform compares set elements by value)", where)
	}
	if a.Nested != "" {
		switch a.Nested {
		case "single", "list", "set", "map":
		default:
			return fmt.Errorf("%s: nested %q (single, list, set, map)", where, a.Nested)
		}
		for _, name := range sortedKeys(a.Attributes) {
			if err := a.Attributes[name].check(where + "." + name); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
