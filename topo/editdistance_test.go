package topo

import "testing"

func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"llama", "lama", 1}, {"h100sxm", "h100pcie", 4}}
	for _, c := range cases {
		if got := EditDistance(c.a, c.b); got != c.d {
			t.Errorf("EditDistance(%q,%q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
