package topo

import (
	"strings"
	"testing"
)

// amplifyingNodelist is issue 12 finding 5: a 4 KB SLURM_STEP_NODELIST whose
// ranges are zero-padded to 250 digits. Each range holds 65,536 names of
// 251 bytes; 15 of them made today's code allocate about 259 MiB in root
// slurmstepd.
func amplifyingNodelist() string {
	// 15 ranges of width 250 in one bracket: 0..0 (250 digits) - 65535
	var r []string
	for i := 0; i < 15; i++ {
		r = append(r, strings.Repeat("0", 250)+"-65535")
	}
	return "n[" + strings.Join(r, ",") + "]"
}

func TestHostlistAmplificationRefused(t *testing.T) {
	expr := amplifyingNodelist()
	if len(expr) > 4096 {
		t.Fatalf("the attack input is %d bytes; it should fit in 4 KB", len(expr))
	}
	names, err := ExpandHostlist(expr)
	if err == nil {
		t.Fatalf("a %d-byte nodelist expanded to %d names (%d bytes each): want an error naming the limit", len(expr), len(names), len(names[0]))
	}
	if !strings.Contains(err.Error(), "trainrun's limit") || len(err.Error()) > 400 {
		t.Errorf("error %q does not name the limit in under 400 bytes", err)
	}
}

// TestHostlistCaps: each cap holds at its edge and fails one past it.
func TestHostlistCaps(t *testing.T) {
	long := strings.Repeat("a", MaxHostNameLen)
	for _, tc := range []struct {
		name, expr string
		ok         bool
	}{
		{"a 255-byte name", long, true},
		{"a 256-byte name", long + "b", false},
		{"a padded range up to 255 bytes", "n[" + strings.Repeat("0", 254) + "-9]", true},
		{"a padded range of 256 bytes", "n[" + strings.Repeat("0", 255) + "-9]", false},
		{"text between groups counts", strings.Repeat("x", 252) + "[1-9]y[1-99]", false},
		{"a bound of 300 digits", "n[" + strings.Repeat("1", 300) + "]", false},
		// 65,536 names of 240 bytes = 15 MiB: under the 16 MiB cap
		{"bytes just under the cap", "n[" + strings.Repeat("0", 239) + "-65535]", true},
		// two such items: 30 MiB
		{"bytes over the cap across items", "n[" + strings.Repeat("0", 239) + "-65535],m[" + strings.Repeat("0", 239) + "-65535]", false},
		{"plain names over the byte cap", strings.Repeat(long+",", MaxHostlistBytes/255+2), false},
	} {
		names, err := ExpandHostlist(tc.expr)
		if (err == nil) != tc.ok {
			t.Errorf("%s: ExpandHostlist gave %d names, err %v; want ok=%v", tc.name, len(names), err, tc.ok)
			continue
		}
		total := 0
		for _, n := range names {
			if len(n) > MaxHostNameLen {
				t.Errorf("%s: name of %d bytes", tc.name, len(n))
			}
			total += len(n)
		}
		if total > MaxHostlistBytes {
			t.Errorf("%s: %d bytes of names, over the cap", tc.name, total)
		}
	}
}

// BenchmarkHostlistWorst is the worst nodelist the caps let through: 16 MiB
// of names from one short expression, and the 4 KB attack refused.
func BenchmarkHostlistWorst(b *testing.B) {
	worst := "n[" + strings.Repeat("0", 239) + "-65535]"
	attack := amplifyingNodelist()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ExpandHostlist(worst); err != nil {
			b.Fatal(err)
		}
		if _, err := ExpandHostlist(attack); err == nil {
			b.Fatal("attack accepted")
		}
	}
}
