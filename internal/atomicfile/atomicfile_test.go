package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for i, want := range []string{"first\n", "second, longer\n", ""} {
		opts := []Option{}
		if i%2 == 0 {
			opts = append(opts, Durable())
		}
		if err := WriteFile(path, []byte(want), 0o640, opts...); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("write %d: read %q, %v; want %q", i, got, err, want)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("mode %v, want 0640 exactly", fi.Mode().Perm())
		}
		if names := entries(t, dir); !slices.Equal(names, []string{"f.json"}) {
			t.Errorf("directory holds %q, want only f.json (no temporary file left)", names)
		}
	}
}

func TestHookSteps(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want []string
	}{
		{nil, []string{"temp-written", "renamed"}},
		{[]Option{Durable()}, []string{"temp-written", "temp-synced", "renamed", "dir-synced"}},
	} {
		var got []string
		path := filepath.Join(t.TempDir(), "x")
		if err := WriteFile(path, []byte("x"), 0o644, append(tc.opts, Hook(func(s string) { got = append(got, s) }))...); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("steps %q, want %q", got, tc.want)
		}
	}
}

// A writer that dies at a step leaves the old file until the rename and the
// new one from then on; before the rename the temporary file carries the
// infix, so its owner can sweep it.
func TestCrashAtEveryStep(t *testing.T) {
	for _, at := range []string{"temp-written", "temp-synced", "renamed", "dir-synced"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ptr")
			if err := WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			type died struct{}
			func() {
				defer func() {
					if r := recover(); r != (died{}) {
						panic(r)
					}
				}()
				WriteFile(path, []byte("new"), 0o644, Durable(), TempInfix(".tmp-test-"), Hook(func(s string) {
					if s == at {
						panic(died{})
					}
				}))
				t.Fatalf("the hook did not stop the write at %s", at)
			}()
			got, _ := os.ReadFile(path)
			want := "old"
			if at == "renamed" || at == "dir-synced" {
				want = "new"
			}
			if string(got) != want {
				t.Errorf("after dying at %s: %q, want %q", at, got, want)
			}
			for _, n := range entries(t, dir) {
				if n != "ptr" && !strings.HasPrefix(n, ".ptr.tmp-test-") {
					t.Errorf("unexpected entry %q", n)
				}
			}
		})
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such", "f")
	if err := WriteFile(missing, nil, 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: err %v, want one naming %s", err, missing)
	}
	// The target is a non-empty directory: the rename fails, the temporary
	// file goes.
	target := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(target, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(target, []byte("x"), 0o644, Durable())
	if err == nil || !strings.Contains(err.Error(), "write "+target+": rename into place") {
		t.Errorf("rename over a directory: err %v", err)
	}
	if names := entries(t, dir); !slices.Equal(names, []string{"d"}) {
		t.Errorf("directory holds %q after a failed write, want only d", names)
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.json")
	if err := WriteJSON(path, map[string]int{"b": 2, "a": 1}, 0o600, Durable()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "{\n  \"a\": 1,\n  \"b\": 2\n}\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := WriteJSON(path, func() {}, 0o600); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("unencodable value: err %v", err)
	}
}

func BenchmarkWriteFile(b *testing.B) {
	dir := b.TempDir()
	data := []byte(strings.Repeat("x", 4096))
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"atomic", nil}, {"durable", []Option{Durable()}}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if err := WriteFile(filepath.Join(dir, tc.name), data, 0o644, tc.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
