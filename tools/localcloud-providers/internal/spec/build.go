package spec

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	eschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/dynamicplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/numberplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The resource package's attribute and block types carry every flag (plan modifiers, write-only); the
// data source, ephemeral and provider packages declare their Attribute and Block as the same
// fwschema interfaces, so one builder serves all four, with plan modifiers only where they mean something.

// ResourceSchema is a managed resource's schema; `id` (computed, kept across updates) is added unless
// the file declares it.
func (b *Block) ResourceSchema() rschema.Schema {
	attrs := b.attributes(true)
	if _, ok := attrs["id"]; !ok {
		attrs["id"] = rschema.StringAttribute{Computed: true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	return rschema.Schema{Attributes: attrs, Blocks: b.blocks(true)}
}

// DataSourceSchema is a data source's schema.
func (b *Block) DataSourceSchema() dschema.Schema {
	out := dschema.Schema{Attributes: map[string]dschema.Attribute{}, Blocks: map[string]dschema.Block{}}
	for k, v := range b.attributes(false) {
		out.Attributes[k] = v
	}
	for k, v := range b.blocks(false) {
		out.Blocks[k] = v
	}
	return out
}

// EphemeralSchema is an ephemeral resource's schema.
func (b *Block) EphemeralSchema() eschema.Schema {
	out := eschema.Schema{Attributes: map[string]eschema.Attribute{}, Blocks: map[string]eschema.Block{}}
	for k, v := range b.attributes(false) {
		out.Attributes[k] = v
	}
	for k, v := range b.blocks(false) {
		out.Blocks[k] = v
	}
	return out
}

// ProviderSchema is the provider block's schema (empty when the file has none).
func (b *Block) ProviderSchema() pschema.Schema {
	out := pschema.Schema{Attributes: map[string]pschema.Attribute{}, Blocks: map[string]pschema.Block{}}
	if b == nil {
		return out
	}
	for k, v := range b.attributes(false) {
		out.Attributes[k] = v
	}
	for k, v := range b.blocks(false) {
		out.Blocks[k] = v
	}
	return out
}

func (b *Block) attributes(resource bool) map[string]rschema.Attribute {
	out := map[string]rschema.Attribute{}
	for name, a := range b.Attributes {
		out[name] = a.build(resource)
	}
	return out
}

func (b *Block) blocks(resource bool) map[string]rschema.Block {
	out := map[string]rschema.Block{}
	for name, nb := range b.Blocks {
		obj := rschema.NestedBlockObject{Attributes: nb.attributes(resource), Blocks: nb.blocks(resource)}
		switch nb.Nesting {
		case "single":
			out[name] = rschema.SingleNestedBlock{Attributes: obj.Attributes, Blocks: obj.Blocks}
		case "set":
			out[name] = rschema.SetNestedBlock{NestedObject: obj,
				Validators: []validator.Set{itemCount{nb.MinItems, nb.MaxItems}}}
		default:
			out[name] = rschema.ListNestedBlock{NestedObject: obj,
				Validators: []validator.List{itemCount{nb.MinItems, nb.MaxItems}}}
		}
	}
	return out
}

// AttrType is the framework type of a typed attribute.
func (t *Type) AttrType() attr.Type {
	switch t.Kind {
	case String:
		return types.StringType
	case Number:
		return types.NumberType
	case Bool:
		return types.BoolType
	case List:
		return types.ListType{ElemType: t.Elem.AttrType()}
	case Set:
		return types.SetType{ElemType: t.Elem.AttrType()}
	case Map:
		return types.MapType{ElemType: t.Elem.AttrType()}
	case Object:
		fields := map[string]attr.Type{}
		for k, v := range t.Fields {
			fields[k] = v.AttrType()
		}
		return types.ObjectType{AttrTypes: fields}
	}
	return types.DynamicType
}

func (a *Attribute) build(resource bool) rschema.Attribute {
	if a.Nested != "" {
		return a.buildNested(resource)
	}
	req, opt, comp, sens, wo := a.Required, a.Optional, a.Computed, a.Sensitive, a.WriteOnly
	m := a.modifiers(resource)
	switch a.Type.Kind {
	case String:
		return rschema.StringAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, stringplanmodifier.RequiresReplace, stringplanmodifier.UseStateForUnknown)}
	case Number:
		return rschema.NumberAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, numberplanmodifier.RequiresReplace, numberplanmodifier.UseStateForUnknown)}
	case Bool:
		return rschema.BoolAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, boolplanmodifier.RequiresReplace, boolplanmodifier.UseStateForUnknown)}
	case List:
		return rschema.ListAttribute{ElementType: a.Type.Elem.AttrType(), Required: req, Optional: opt,
			Computed: comp, Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, listplanmodifier.RequiresReplace, listplanmodifier.UseStateForUnknown)}
	case Set:
		return rschema.SetAttribute{ElementType: a.Type.Elem.AttrType(), Required: req, Optional: opt,
			Computed: comp, Sensitive: sens,
			PlanModifiers: pick(m, setplanmodifier.RequiresReplace, setplanmodifier.UseStateForUnknown)}
	case Map:
		return rschema.MapAttribute{ElementType: a.Type.Elem.AttrType(), Required: req, Optional: opt,
			Computed: comp, Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, mapplanmodifier.RequiresReplace, mapplanmodifier.UseStateForUnknown)}
	case Object:
		return rschema.ObjectAttribute{AttributeTypes: a.Type.AttrType().(types.ObjectType).AttrTypes,
			Required: req, Optional: opt, Computed: comp, Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, objectplanmodifier.RequiresReplace, objectplanmodifier.UseStateForUnknown)}
	}
	return rschema.DynamicAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, WriteOnly: wo,
		PlanModifiers: pick(m, dynamicplanmodifier.RequiresReplace, dynamicplanmodifier.UseStateForUnknown)}
}

func (a *Attribute) buildNested(resource bool) rschema.Attribute {
	req, opt, comp, sens, wo := a.Required, a.Optional, a.Computed, a.Sensitive, a.WriteOnly
	m := a.modifiers(resource)
	attrs := map[string]rschema.Attribute{}
	for name, child := range a.Attributes {
		attrs[name] = child.build(resource)
	}
	obj := rschema.NestedAttributeObject{Attributes: attrs}
	switch a.Nested {
	case "list":
		return rschema.ListNestedAttribute{NestedObject: obj, Required: req, Optional: opt, Computed: comp,
			Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, listplanmodifier.RequiresReplace, listplanmodifier.UseStateForUnknown)}
	case "set":
		return rschema.SetNestedAttribute{NestedObject: obj, Required: req, Optional: opt, Computed: comp,
			Sensitive:     sens,
			PlanModifiers: pick(m, setplanmodifier.RequiresReplace, setplanmodifier.UseStateForUnknown)}
	case "map":
		return rschema.MapNestedAttribute{NestedObject: obj, Required: req, Optional: opt, Computed: comp,
			Sensitive: sens, WriteOnly: wo,
			PlanModifiers: pick(m, mapplanmodifier.RequiresReplace, mapplanmodifier.UseStateForUnknown)}
	}
	return rschema.SingleNestedAttribute{Attributes: attrs, Required: req, Optional: opt, Computed: comp,
		Sensitive: sens, WriteOnly: wo,
		PlanModifiers: pick(m, objectplanmodifier.RequiresReplace, objectplanmodifier.UseStateForUnknown)}
}

type modifierFlags struct{ replace, keep bool }

func (a *Attribute) modifiers(resource bool) modifierFlags {
	if !resource {
		return modifierFlags{}
	}
	return modifierFlags{replace: a.Replace, keep: a.Keep && a.Computed}
}

// pick returns the plan modifiers the flags ask for, nil when none (the framework treats nil and empty alike).
func pick[M any](f modifierFlags, replace func() M, keep func() M) []M {
	var out []M
	if f.replace {
		out = append(out, replace())
	}
	if f.keep {
		out = append(out, keep())
	}
	return out
}

// itemCount enforces a block's min_items / max_items (the framework no longer puts them in the schema).
type itemCount struct{ min, max int }

func (v itemCount) Description(context.Context) string {
	return fmt.Sprintf("between %d and %d blocks", v.min, v.max)
}

func (v itemCount) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v itemCount) check(n int, known bool) string {
	if !known {
		return ""
	}
	if n < v.min {
		return fmt.Sprintf("at least %d block(s) required, %d given", v.min, n)
	}
	if v.max > 0 && n > v.max {
		return fmt.Sprintf("at most %d block(s) allowed, %d given", v.max, n)
	}
	return ""
}

func (v itemCount) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if msg := v.check(len(req.ConfigValue.Elements()), !req.ConfigValue.IsUnknown()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid block count", msg)
	}
}

func (v itemCount) ValidateSet(_ context.Context, req validator.SetRequest, resp *validator.SetResponse) {
	if msg := v.check(len(req.ConfigValue.Elements()), !req.ConfigValue.IsUnknown()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid block count", msg)
	}
}
