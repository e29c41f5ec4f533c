// Package generic implements a provider, its resources, data sources and ephemeral resources from a
// schema file: the schema is the file's, every call goes to the worker (PROTOCOL.md).
package generic

import (
	"context"
	"os"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/npa-pulumi/localcloud-providers/internal/convert"
	"github.com/npa-pulumi/localcloud-providers/internal/functions"
	"github.com/npa-pulumi/localcloud-providers/internal/spec"
	"github.com/npa-pulumi/localcloud-providers/internal/worker"
)

// LocalCloudDirEnv must be set for the providers to serve: the bridge sets it for `--cloud local` only,
// so these providers never stand in for Nebius on a real tenant.
const LocalCloudDirEnv = "NPA_LOCAL_CLOUD_DIR"

// Provider is one schema file's provider.
type Provider struct {
	File    *spec.File
	version string
	client  *worker.Client
}

var (
	_ provider.Provider                       = (*Provider)(nil)
	_ provider.ProviderWithFunctions          = (*Provider)(nil)
	_ provider.ProviderWithEphemeralResources = (*Provider)(nil)
)

// New is the provider of a schema file.
func New(f *spec.File) func(version string) provider.Provider {
	return func(version string) provider.Provider {
		return &Provider{File: f, version: version, client: &worker.Client{Address: f.Namespace + "/" + f.Type}}
	}
}

func (p *Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = p.File.Type
	resp.Version = p.version
}

func (p *Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = p.File.Provider.ProviderSchema()
}

func (p *Provider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	if os.Getenv(LocalCloudDirEnv) == "" {
		resp.Diagnostics.AddError("Not on the local cloud",
			"This is the npa-pulumi local cloud's stand-in for "+p.File.Namespace+"/"+p.File.Type+
				"; it serves only where "+LocalCloudDirEnv+" names a local cloud (npa-pulumi sets it for "+
				"--cloud local). Against a real cloud, use the real provider.")
		return
	}
	cfg, err := convert.ToJSON(req.Config.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Reading the provider configuration", err.Error())
		return
	}
	p.client.SetProviderConfig(cfg)
	resp.ResourceData = p.client
	resp.DataSourceData = p.client
	resp.EphemeralResourceData = p.client
}

func (p *Provider) Resources(context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, name := range sorted(p.File.Resources) {
		b := p.File.Resources[name]
		out = append(out, func() resource.Resource { return &Resource{name: name, block: b} })
	}
	return out
}

func (p *Provider) DataSources(context.Context) []func() datasource.DataSource {
	var out []func() datasource.DataSource
	for _, name := range sorted(p.File.DataSources) {
		b := p.File.DataSources[name]
		out = append(out, func() datasource.DataSource { return &DataSource{name: name, block: b} })
	}
	return out
}

func (p *Provider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	var out []func() ephemeral.EphemeralResource
	for _, name := range sorted(p.File.EphemeralResources) {
		b := p.File.EphemeralResources[name]
		out = append(out, func() ephemeral.EphemeralResource { return &Ephemeral{name: name, block: b} })
	}
	return out
}

func (p *Provider) Functions(context.Context) []func() function.Function {
	var out []func() function.Function
	for _, name := range p.File.Functions {
		if fn, ok := functions.ByName[name]; ok {
			out = append(out, fn)
		}
	}
	return out
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// call sends one request with the given Terraform values converted to JSON and converts the result
// back to typ; a worker error becomes the diagnostic it carries.
func call(client *worker.Client, method, typeName string, typ tftypes.Type, values map[string]tftypes.Value,
	extra map[string]any, diags *diag.Diagnostics) (tftypes.Value, bool) {
	if client == nil {
		diags.AddError("Provider not configured", "the provider was not configured before "+method+
			" (is "+LocalCloudDirEnv+" set?)")
		return tftypes.Value{}, false
	}
	fields := map[string]any{}
	for k, v := range extra {
		fields[k] = v
	}
	for k, v := range values {
		j, err := convert.ToJSON(v)
		if err != nil {
			diags.AddError("Converting "+k+" for the worker", err.Error())
			return tftypes.Value{}, false
		}
		fields[k] = j
	}
	result, err := client.Call(method, typeName, fields)
	if err != nil {
		if we, ok := err.(*worker.Error); ok {
			diags.AddError(we.Summary, we.Detail)
		} else {
			diags.AddError("The local cloud's provider worker failed", err.Error())
		}
		return tftypes.Value{}, false
	}
	out, err := convert.FromJSON(typ, result)
	if err != nil {
		diags.AddError("The local cloud's "+typeName+" answered a value its schema does not allow", err.Error())
		return tftypes.Value{}, false
	}
	return out, true
}
