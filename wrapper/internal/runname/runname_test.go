package runname

import (
	"strings"
	"testing"
)

func TestDerive(t *testing.T) {
	a := Derive([]string{"python3", "-u", "train_example.py", "--lr", "0.1"})
	if a != Derive([]string{"python3", "-u", "train_example.py", "--lr", "0.1"}) {
		t.Fatal("the same command line got two names")
	}
	if !strings.HasPrefix(a, "train_example-") || len(a) != len("train_example-")+8 {
		t.Errorf("name %q: want train_example-<8 hex>", a)
	}
	b := Derive([]string{"python3", "-u", "train_example.py", "--lr", "0.2"})
	if a == b {
		t.Errorf("different commands share the name %q", a)
	}
	for _, argv := range [][]string{{"/opt/x y/évil;rm -rf", "a"}, {"python", "-m", "torch.distributed.run"}, {"--"}} {
		n := Derive(argv)
		if err := Check(n); err != nil {
			t.Errorf("derived name %q of %q is not a valid --name: %v", n, argv, err)
		}
	}
	if n := Derive([]string{"python", "-m", "pkg.mod"}); !strings.HasPrefix(n, "pkg.mod-") {
		t.Errorf("python -m pkg.mod: got %q", n)
	}
}

func TestCheck(t *testing.T) {
	for _, bad := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 65), "sp ace"} {
		if err := Check(bad); err == nil || !strings.Contains(err.Error(), "--name") {
			t.Errorf("Check(%q) = %v, want an error naming --name", bad, err)
		}
	}
	if err := Check("trial-3"); err != nil {
		t.Error(err)
	}
}
