package convert

import (
	"encoding/json"
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

var objType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"id":     tftypes.String,
	"size":   tftypes.Number,
	"on":     tftypes.Bool,
	"labels": tftypes.Map{ElementType: tftypes.String},
	"cidrs":  tftypes.List{ElementType: tftypes.String},
	"status": tftypes.Object{AttributeTypes: map[string]tftypes.Type{"state": tftypes.String}},
	"extra":  tftypes.DynamicPseudoType,
}}

func TestUnknownLeavesAsNullAndNumbersStayExact(t *testing.T) {
	v := tftypes.NewValue(objType, map[string]tftypes.Value{
		"id":     tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
		"size":   tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(1<<62)),
		"on":     tftypes.NewValue(tftypes.Bool, true),
		"labels": tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, nil),
		"cidrs": tftypes.NewValue(tftypes.List{ElementType: tftypes.String},
			[]tftypes.Value{tftypes.NewValue(tftypes.String, "10.0.0.0/8")}),
		"status": tftypes.NewValue(objType.AttributeTypes["status"], tftypes.UnknownValue),
		"extra":  tftypes.NewValue(tftypes.DynamicPseudoType, nil),
	})
	j, err := ToJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(j)
	want := `{"cidrs":["10.0.0.0/8"],"extra":null,"id":null,"labels":null,"on":true,"size":4611686018427387904,"status":null}`
	if string(data) != want {
		t.Fatalf("got %s\nwant %s", data, want)
	}
}

func TestFromJSONBuildsTheSchemaTypeAndRoundTrips(t *testing.T) {
	x, err := Decode([]byte(`{"id":"c-1","size":1.5,"on":false,"labels":{"a":3,"b":true},"cidrs":[],` +
		`"status":{"state":"RUNNING"},"extra":{"k":[1,"x"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := FromJSON(objType, x)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]tftypes.Value
	if err := v.As(&fields); err != nil {
		t.Fatal(err)
	}
	var labels map[string]tftypes.Value
	_ = fields["labels"].As(&labels)
	var a, b string
	_ = labels["a"].As(&a)
	_ = labels["b"].As(&b)
	if a != "3" || b != "true" {
		t.Fatalf("scalars into a string map: %q %q", a, b)
	}
	if !fields["extra"].Type().Is(tftypes.Object{}) {
		t.Fatalf("a dynamic value takes its JSON's type, got %s", fields["extra"].Type())
	}
	back, err := ToJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(back)
	want := `{"cidrs":[],"extra":{"k":[1,"x"]},"id":"c-1","labels":{"a":"3","b":"true"},"on":false,"size":1.5,"status":{"state":"RUNNING"}}`
	if string(data) != want {
		t.Fatalf("got %s\nwant %s", data, want)
	}
}

func TestFromJSONMissingAttributesAreNull(t *testing.T) {
	v, err := FromJSON(objType, map[string]any{"id": "x"})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]tftypes.Value
	_ = v.As(&fields)
	if !fields["status"].IsNull() || !fields["size"].IsNull() {
		t.Fatal("missing attributes must be null")
	}
}

func TestFromJSONRejectsWhatTheSchemaLacks(t *testing.T) {
	if _, err := FromJSON(objType, map[string]any{"nope": "x"}); err == nil {
		t.Fatal("an attribute the schema lacks must be an error")
	}
	if _, err := FromJSON(objType, map[string]any{"on": "yes"}); err == nil {
		t.Fatal("a string is not a bool")
	}
	if _, err := FromJSON(objType, map[string]any{"size": json.Number("twelve")}); err == nil {
		t.Fatal("not a number")
	}
}
