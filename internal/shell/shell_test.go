package shell

import "testing"

func TestShellQuote(t *testing.T) {
	cases := map[string]string{
		"=mlx5_0:1,mlx5_3:1": "=mlx5_0:1,mlx5_3:1",
		"":                   "''",
		"a b":                "'a b'",
		"it's":               `'it'\''s'`,
		"/opt/x.xml":         "/opt/x.xml",
		"$HOME":              "'$HOME'",
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestJoin(t *testing.T) {
	if got, want := Join([]string{"python", "train.py", "--name", "a b", ""}), "python train.py --name 'a b' ''"; got != want {
		t.Errorf("Join = %s, want %s", got, want)
	}
}
