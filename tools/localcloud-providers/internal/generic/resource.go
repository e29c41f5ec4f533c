package generic

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/npa-pulumi/localcloud-providers/internal/spec"
	"github.com/npa-pulumi/localcloud-providers/internal/worker"
)

// Resource is a managed resource type of a schema file.
type Resource struct {
	name   string
	block  *spec.Block
	client *worker.Client
}

var (
	_ resource.ResourceWithConfigure   = (*Resource)(nil)
	_ resource.ResourceWithImportState = (*Resource)(nil)
)

func (r *Resource) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = r.name
}

func (r *Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.block.ResourceSchema()
}

func (r *Resource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*worker.Client); ok {
		r.client = c
	}
}

func (r *Resource) stateType(ctx context.Context) tftypes.Type {
	return r.block.ResourceSchema().Type().TerraformType(ctx)
}

func (r *Resource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	out, ok := call(r.client, "create", r.name, r.stateType(ctx),
		map[string]tftypes.Value{"planned": req.Plan.Raw, "config": req.Config.Raw}, nil, &resp.Diagnostics)
	if ok {
		resp.State.Raw = out
	}
}

func (r *Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	out, ok := call(r.client, "read", r.name, r.stateType(ctx),
		map[string]tftypes.Value{"state": req.State.Raw}, nil, &resp.Diagnostics)
	if !ok {
		return
	}
	if out.IsNull() {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.State.Raw = out
}

func (r *Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	out, ok := call(r.client, "update", r.name, r.stateType(ctx), map[string]tftypes.Value{
		"planned": req.Plan.Raw, "prior": req.State.Raw, "config": req.Config.Raw}, nil, &resp.Diagnostics)
	if ok {
		resp.State.Raw = out
	}
}

func (r *Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	_, _ = call(r.client, "delete", r.name, tftypes.DynamicPseudoType,
		map[string]tftypes.Value{"state": req.State.Raw}, nil, &resp.Diagnostics)
}

// ImportState passes the bare id to the worker, which reads the object (nebius imports by plain id).
func (r *Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	out, ok := call(r.client, "import", r.name, r.stateType(ctx), nil,
		map[string]any{"import_id": req.ID}, &resp.Diagnostics)
	if !ok {
		return
	}
	if out.IsNull() {
		resp.Diagnostics.AddError("Cannot import a missing object", r.name+" "+req.ID+" does not exist")
		return
	}
	resp.State.Raw = out
}

// DataSource is a data source type of a schema file.
type DataSource struct {
	name   string
	block  *spec.Block
	client *worker.Client
}

var _ datasource.DataSourceWithConfigure = (*DataSource)(nil)

func (d *DataSource) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = d.name
}

func (d *DataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = d.block.DataSourceSchema()
}

func (d *DataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*worker.Client); ok {
		d.client = c
	}
}

func (d *DataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	typ := d.block.DataSourceSchema().Type().TerraformType(ctx)
	out, ok := call(d.client, "read_data", d.name, typ,
		map[string]tftypes.Value{"config": req.Config.Raw}, nil, &resp.Diagnostics)
	if ok {
		resp.State.Raw = out
	}
}

// Ephemeral is an ephemeral resource type of a schema file.
type Ephemeral struct {
	name   string
	block  *spec.Block
	client *worker.Client
}

var _ ephemeral.EphemeralResourceWithConfigure = (*Ephemeral)(nil)

func (e *Ephemeral) Metadata(_ context.Context, _ ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = e.name
}

func (e *Ephemeral) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = e.block.EphemeralSchema()
}

func (e *Ephemeral) Configure(_ context.Context, req ephemeral.ConfigureRequest, _ *ephemeral.ConfigureResponse) {
	if c, ok := req.ProviderData.(*worker.Client); ok {
		e.client = c
	}
}

func (e *Ephemeral) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	typ := e.block.EphemeralSchema().Type().TerraformType(ctx)
	out, ok := call(e.client, "open_ephemeral", e.name, typ,
		map[string]tftypes.Value{"config": req.Config.Raw}, nil, &resp.Diagnostics)
	if ok {
		resp.Result.Raw = out
	}
}
