package checkpoint

import "testing"

func BenchmarkSplitPlanes2(b *testing.B) {
	raw := make([]byte, 1<<20)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	planes := [][]byte{make([]byte, 1<<19), make([]byte, 1<<19)}
	b.SetBytes(1 << 20)
	for i := 0; i < b.N; i++ {
		splitPlanes(raw, planes)
	}
}

func BenchmarkJoinPlanes2(b *testing.B) {
	raw := make([]byte, 1<<20)
	planes := [][]byte{make([]byte, 1<<19), make([]byte, 1<<19)}
	b.SetBytes(1 << 20)
	for i := 0; i < b.N; i++ {
		joinPlanes(raw, planes)
	}
}

// TestPlanesWordAtATime: the 8-byte split and join equal the byte loop, for
// every length (the tails).
func TestPlanesWordAtATime(t *testing.T) {
	for _, e := range []int{2, 4} {
		for n := 0; n < 40; n++ {
			raw := make([]byte, n*e)
			for i := range raw {
				raw[i] = byte(i*37 + 11)
			}
			planes := make([][]byte, e)
			for p := range planes {
				planes[p] = make([]byte, n)
			}
			splitPlanes(raw, planes)
			for i := 0; i < n; i++ {
				for p := 0; p < e; p++ {
					if planes[p][i] != raw[i*e+p] {
						t.Fatalf("elem %d n %d: plane %d[%d] = %d, want %d", e, n, p, i, planes[p][i], raw[i*e+p])
					}
				}
			}
			back := make([]byte, n*e)
			joinPlanes(back, planes)
			if string(back) != string(raw) {
				t.Fatalf("elem %d n %d: join is not the inverse of split", e, n)
			}
		}
	}
}
