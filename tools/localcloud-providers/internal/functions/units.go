// Package functions holds the provider-defined functions the local providers serve, by the name a schema
// file's "functions" lists. dstaroff/units' are byte conversions: upstream's filesystem.tf calls
// provider::units::from_gib(size), from_kib(block size) and to_gib(status.size_bytes).
package functions

import (
	"context"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/function"
)

const (
	kib = 1 << 10
	gib = 1 << 30
)

// ByName is every function a schema file may list.
var ByName = map[string]func() function.Function{
	"from_gib": func() function.Function { return scale{"from_gib", "gibibytes to bytes", gib, false} },
	"from_kib": func() function.Function { return scale{"from_kib", "kibibytes to bytes", kib, false} },
	"to_gib":   func() function.Function { return scale{"to_gib", "bytes to gibibytes", gib, true} },
}

// scale multiplies (or divides) a number by a power of two: exact, as the real provider's big numbers.
type scale struct {
	name, summary string
	factor        int64
	divide        bool
}

func (s scale) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = s.name
}

func (s scale) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary:    s.summary,
		Parameters: []function.Parameter{function.NumberParameter{Name: "value"}},
		Return:     function.NumberReturn{},
	}
}

func (s scale) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var in *big.Float
	resp.Error = req.Arguments.Get(ctx, &in)
	if resp.Error != nil {
		return
	}
	resp.Error = resp.Result.Set(ctx, Apply(in, s.factor, s.divide))
}

// Apply is the conversion itself.
func Apply(in *big.Float, factor int64, divide bool) *big.Float {
	f := new(big.Float).SetPrec(512).SetInt64(factor)
	out := new(big.Float).SetPrec(512)
	if divide {
		return out.Quo(in, f)
	}
	return out.Mul(in, f)
}
