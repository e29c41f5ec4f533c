package registry

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/npa-pulumi/localcloud-providers/schemas"
)

// every flag and shape of PROTOCOL.md in one file: the framework must accept the schema it builds
const kitchenSink = `{
  "namespace": "npa", "type": "sink", "version": "0.0.1",
  "provider": {"attributes": {"token": {"type": "string", "optional": true, "sensitive": true}}},
  "resources": {"sink_thing": {
    "attributes": {
      "parent_id": {"type": "string", "required": true, "replace": true},
      "labels": {"type": {"map": "string"}, "optional": true},
      "secret": {"type": "string", "optional": true, "write_only": true},
      "any": {"type": "dynamic", "optional": true},
      "spec": {"nested": "single", "required": true, "attributes": {
        "size": {"type": "number", "optional": true},
        "items": {"nested": "list", "optional": true, "attributes": {"n": {"type": "bool", "required": true}}}}},
      "status": {"nested": "single", "computed": true, "keep": true, "attributes": {
        "state": {"type": "string", "computed": true},
        "pools": {"type": {"list": {"object": {"cidr": "string"}}}, "computed": true}}}
    },
    "blocks": {"metadata": {"nesting": "list", "min_items": 1, "max_items": 1,
      "attributes": {"name": {"type": "string", "required": true}}}}
  }},
  "data_sources": {"sink_thing": {"attributes": {"id": {"type": "string", "optional": true, "computed": true},
    "status": {"nested": "single", "computed": true, "attributes": {"state": {"type": "string", "computed": true}}}}}},
  "ephemeral_resources": {"sink_secret": {"attributes": {"key": {"type": "string", "required": true},
    "data": {"nested": "single", "computed": true, "sensitive": true, "attributes": {
      "string_value": {"type": "string", "computed": true}}}}}}
}`

func TestEverySchemaFileServesWithoutDiagnostics(t *testing.T) {
	entries = map[string]Entry{}
	if err := Load(schemas.Files); err != nil {
		t.Fatal(err)
	}
	if err := Load(fstest.MapFS{"npa-sink.json": {Data: []byte(kitchenSink)}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := ByType("units"); !ok {
		t.Fatal("dstaroff/units is not registered")
	}
	for _, e := range All() {
		server, err := providerserver.NewProtocol6WithError(e.New(e.Version))()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.Diagnostics {
			t.Errorf("%s/%s: %s: %s", e.Namespace, e.Type, d.Summary, d.Detail)
		}
	}
	sink, _ := ByType("sink")
	server, _ := providerserver.NewProtocol6WithError(sink.New(sink.Version))()
	resp, _ := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	thing := resp.ResourceSchemas["sink_thing"]
	if thing == nil || resp.DataSourceSchemas["sink_thing"] == nil || resp.EphemeralResourceSchemas["sink_secret"] == nil {
		t.Fatalf("missing types: %v", resp)
	}
	flags := map[string]*tfprotov6.SchemaAttribute{}
	for _, a := range thing.Block.Attributes {
		flags[a.Name] = a
	}
	if flags["id"] == nil || !flags["id"].Computed {
		t.Error("a resource gets a computed id")
	}
	if !flags["secret"].WriteOnly || !flags["parent_id"].Required || flags["status"].NestedType == nil {
		t.Error("flags lost in the served schema")
	}
}

func TestLoadRejectsABadFile(t *testing.T) {
	entries = map[string]Entry{}
	bad := `{"namespace": "a", "type": "b", "version": "1", "resources": {"b_x": {"attributes": {"n": {"type": "strin", "optional": true}}}}}`
	if err := Load(fstest.MapFS{"a-b.json": {Data: []byte(bad)}}); err == nil {
		t.Fatal("an unknown type name must fail to load")
	}
	noFlag := `{"namespace": "a", "type": "b", "version": "1", "resources": {"b_x": {"attributes": {"n": {"type": "string"}}}}}`
	if err := Load(fstest.MapFS{"a-b.json": {Data: []byte(noFlag)}}); err == nil {
		t.Fatal("an attribute that is neither required, optional nor computed must fail to load")
	}
}
