package functions

import (
	"math/big"
	"testing"
)

func TestUnitsConversions(t *testing.T) {
	cases := []struct {
		in     float64
		factor int64
		divide bool
		want   string
	}{
		{100, gib, false, "107374182400"},
		{4, kib, false, "4096"},
		{107374182400, gib, true, "100"},
		{1610612736, gib, true, "1.5"},
	}
	for _, c := range cases {
		got := Apply(big.NewFloat(c.in), c.factor, c.divide).Text('f', -1)
		if got != c.want {
			t.Errorf("%v (factor %d, divide %v): got %s, want %s", c.in, c.factor, c.divide, got, c.want)
		}
	}
	for _, name := range []string{"from_gib", "from_kib", "to_gib"} {
		if _, ok := ByName[name]; !ok {
			t.Errorf("%s is not served", name)
		}
	}
}
