// Package convert turns Terraform values into the worker's JSON and back (PROTOCOL.md): by the schema's
// type, an unknown value leaves as null, a JSON number becomes a Terraform number without a float64
// round trip, and a dynamic attribute takes the type its JSON has.
package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// ToJSON is the JSON form of a value: null for null and unknown, objects and maps as JSON objects,
// lists, sets and tuples as arrays, numbers as json.Number (exact).
func ToJSON(v tftypes.Value) (any, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, nil
	}
	t := v.Type()
	switch {
	case t.Is(tftypes.String):
		var s string
		err := v.As(&s)
		return s, err
	case t.Is(tftypes.Bool):
		var b bool
		err := v.As(&b)
		return b, err
	case t.Is(tftypes.Number):
		var f big.Float
		if err := v.As(&f); err != nil {
			return nil, err
		}
		return numberText(&f), nil
	case t.Is(tftypes.List{}), t.Is(tftypes.Set{}), t.Is(tftypes.Tuple{}):
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(elems))
		for _, e := range elems {
			j, err := ToJSON(e)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		return out, nil
	case t.Is(tftypes.Map{}), t.Is(tftypes.Object{}):
		var fields map[string]tftypes.Value
		if err := v.As(&fields); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(fields))
		for k, e := range fields {
			j, err := ToJSON(e)
			if err != nil {
				return nil, err
			}
			out[k] = j
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot convert a value of type %s", t)
}

func numberText(f *big.Float) json.Number {
	if f.IsInt() {
		return json.Number(f.Text('f', 0))
	}
	return json.Number(f.Text('g', -1))
}

// Decode parses the worker's JSON, keeping numbers exact.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// FromJSON builds a value of type t from the worker's JSON. A missing object attribute is null; a key
// the type does not have is an error (a handler that writes a field its schema lacks is a bug, and
// Terraform would otherwise drop it silently). Scalars convert as Terraform converts them (a number or a
// bool into a string attribute), so a handler may echo a map(string) configured with numbers.
func FromJSON(t tftypes.Type, x any) (tftypes.Value, error) {
	return fromJSON(t, x, "")
}

func fromJSON(t tftypes.Type, x any, at string) (tftypes.Value, error) {
	if t.Is(tftypes.DynamicPseudoType) {
		if x == nil {
			return tftypes.NewValue(tftypes.DynamicPseudoType, nil), nil
		}
		return fromJSON(inferType(x), x, at)
	}
	if x == nil {
		return tftypes.NewValue(t, nil), nil
	}
	switch {
	case t.Is(tftypes.String):
		switch s := x.(type) {
		case string:
			return tftypes.NewValue(t, s), nil
		case json.Number:
			return tftypes.NewValue(t, s.String()), nil
		case bool:
			return tftypes.NewValue(t, fmt.Sprint(s)), nil
		}
	case t.Is(tftypes.Bool):
		if b, ok := x.(bool); ok {
			return tftypes.NewValue(t, b), nil
		}
	case t.Is(tftypes.Number):
		var text string
		switch n := x.(type) {
		case json.Number:
			text = n.String()
		case float64:
			text = fmt.Sprint(n)
		case string:
			text = n
		}
		if f, ok := new(big.Float).SetPrec(512).SetString(text); ok {
			return tftypes.NewValue(t, f), nil
		}
	case t.Is(tftypes.List{}), t.Is(tftypes.Set{}):
		arr, ok := x.([]any)
		if !ok {
			break
		}
		var elem tftypes.Type
		if l, isList := t.(tftypes.List); isList {
			elem = l.ElementType
		} else {
			elem = t.(tftypes.Set).ElementType
		}
		vals := make([]tftypes.Value, 0, len(arr))
		for i, e := range arr {
			v, err := fromJSON(elem, e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return tftypes.Value{}, err
			}
			vals = append(vals, v)
		}
		return tftypes.NewValue(t, vals), nil
	case t.Is(tftypes.Tuple{}):
		arr, ok := x.([]any)
		tt := t.(tftypes.Tuple)
		if !ok || len(arr) != len(tt.ElementTypes) {
			break
		}
		vals := make([]tftypes.Value, len(arr))
		for i, e := range arr {
			v, err := fromJSON(tt.ElementTypes[i], e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[i] = v
		}
		return tftypes.NewValue(t, vals), nil
	case t.Is(tftypes.Map{}):
		obj, ok := x.(map[string]any)
		if !ok {
			break
		}
		elem := t.(tftypes.Map).ElementType
		vals := make(map[string]tftypes.Value, len(obj))
		for k, e := range obj {
			v, err := fromJSON(elem, e, at+"."+k)
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[k] = v
		}
		return tftypes.NewValue(t, vals), nil
	case t.Is(tftypes.Object{}):
		obj, ok := x.(map[string]any)
		if !ok {
			break
		}
		ot := t.(tftypes.Object)
		for k := range obj {
			if _, known := ot.AttributeTypes[k]; !known {
				return tftypes.Value{}, fmt.Errorf("%s: the schema has no attribute %q", orRoot(at), k)
			}
		}
		vals := make(map[string]tftypes.Value, len(ot.AttributeTypes))
		for k, at2 := range ot.AttributeTypes {
			v, err := fromJSON(at2, obj[k], at+"."+k)
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[k] = v
		}
		return tftypes.NewValue(t, vals), nil
	}
	return tftypes.Value{}, fmt.Errorf("%s: %T is not a %s", orRoot(at), x, t)
}

func orRoot(at string) string {
	if at == "" {
		return "(root)"
	}
	return at
}

// inferType is the type a dynamic attribute's JSON value takes: arrays as tuples, objects as objects.
func inferType(x any) tftypes.Type {
	switch v := x.(type) {
	case string:
		return tftypes.String
	case bool:
		return tftypes.Bool
	case json.Number, float64:
		return tftypes.Number
	case []any:
		elems := make([]tftypes.Type, len(v))
		for i, e := range v {
			elems[i] = inferType(e)
		}
		return tftypes.Tuple{ElementTypes: elems}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fields := make(map[string]tftypes.Type, len(v))
		for _, k := range keys {
			fields[k] = inferType(v[k])
		}
		return tftypes.Object{AttributeTypes: fields}
	}
	return tftypes.DynamicPseudoType
}
