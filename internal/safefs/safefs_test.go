package safefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// otherUID chowns p to another uid (nobody), which needs root; without it
// the test skips the case.
func otherUID(t *testing.T, p string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file another uid's")
	}
	if err := os.Lchown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

func TestMkdirOwnCreatesPrivate(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a", "job")
	if err := MkdirOwn(d, "job directory"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("mode %v, want no group/other bits", fi.Mode())
	}
	if err := MkdirOwn(d, "job directory"); err != nil {
		t.Fatalf("own existing directory refused: %v", err)
	}
}

func TestMkdirOwnRefuses(t *testing.T) {
	cases := map[string]func(t *testing.T, p string){
		"other uid": func(t *testing.T, p string) {
			os.Mkdir(p, 0o700)
			otherUID(t, p)
		},
		"world-writable": func(t *testing.T, p string) {
			os.Mkdir(p, 0o700)
			os.Chmod(p, 0o777)
		},
		"group-writable": func(t *testing.T, p string) {
			os.Mkdir(p, 0o700)
			os.Chmod(p, 0o770)
		},
		"symlink to own dir": func(t *testing.T, p string) {
			target := p + ".real"
			os.Mkdir(target, 0o700)
			os.Symlink(target, p)
		},
		"file": func(t *testing.T, p string) { os.WriteFile(p, nil, 0o600) },
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "trainrun-42")
			setup(t, p)
			err := MkdirOwn(p, "--ckpt-local-dir")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "--ckpt-local-dir") {
				t.Fatalf("error does not name the directory and the option: %v", err)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	d := t.TempDir()
	ok := filepath.Join(d, "ok")
	os.WriteFile(ok, []byte("hello"), 0o600)
	if b, err := ReadFile(ok, 5); err != nil || string(b) != "hello" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ReadFile(ok, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := ReadFile(filepath.Join(d, "none"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	secret := filepath.Join(d, "secret")
	os.WriteFile(secret, []byte(`{"key":"s3cr3t"}`), 0o600)
	link := filepath.Join(d, "link")
	os.Symlink(secret, link)
	if b, err := ReadFile(link, 1<<10); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("followed a link: %q %v", b, err)
	}
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo, 1<<10); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("fifo: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	if _, err := ReadFile(d, 10); err == nil {
		t.Fatal("read a directory")
	}
}

func TestReadOwnFile(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "common.json")
	os.WriteFile(p, []byte("{}"), 0o600)
	if _, err := ReadOwnFile(p, "launch file", 100); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o666)
	if _, err := ReadOwnFile(p, "launch file", 100); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Fatalf("world-writable accepted: %v", err)
	}
	os.Chmod(p, 0o644)
	otherUID(t, p)
	if _, err := ReadOwnFile(p, "launch file", 100); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("another uid's file accepted: %v", err)
	}
}

func TestOpenDirRefusesLinks(t *testing.T) {
	base := t.TempDir()
	victim := t.TempDir()
	os.Mkdir(filepath.Join(base, "meta"), 0o755)
	os.Symlink(victim, filepath.Join(base, "meta", "trash"))
	if _, err := OpenDir(base, "meta", "trash"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("followed a link: %v", err)
	}
	os.Mkdir(filepath.Join(base, "real"), 0o755)
	d, err := OpenDir(base, "real")
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := OpenDir(base, "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := OpenDir(base, ".."); err == nil {
		t.Fatal("accepted ..")
	}
}

func TestRemoveAllAtNeverFollows(t *testing.T) {
	base := t.TempDir()
	victim := t.TempDir()
	keep := filepath.Join(victim, "precious")
	os.WriteFile(keep, []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(victim, "sub"), 0o755)
	os.WriteFile(filepath.Join(victim, "sub", "f"), []byte("x"), 0o600)

	trash := filepath.Join(base, "trash")
	os.MkdirAll(filepath.Join(trash, "step-1.1", "a", "b"), 0o755)
	os.WriteFile(filepath.Join(trash, "step-1.1", "a", "b", "w.bin"), []byte("w"), 0o600)
	os.Symlink(victim, filepath.Join(trash, "step-1.1", "a", "link"))
	os.Symlink(victim, filepath.Join(trash, "step-2.2"))
	d, err := OpenDir(base, "trash")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, n := range []string{"step-1.1", "step-2.2", "absent"} {
		if err := RemoveAllAt(d, n); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(trash)
	if len(ents) != 0 {
		t.Fatalf("trash not empty: %v", ents)
	}
	for _, p := range []string{keep, filepath.Join(victim, "sub", "f")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the link's target lost %s: %v", p, err)
		}
	}
	if err := RemoveAllAt(d, "../x"); err == nil {
		t.Fatal("accepted a path")
	}
}
