package snapshot

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

//go:embed machines/*.spec machines/files
var machines embed.FS

// Names lists the built-in machines, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(machines, "machines")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".spec"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Lookup parses the named built-in machine's spec.
func Lookup(name string) (*Spec, error) {
	data, err := machines.ReadFile(path.Join("machines", name+".spec"))
	if err != nil {
		return nil, fmt.Errorf("no built-in machine %q; run 'trainrun topo --machine list' (known: %s)", name, strings.Join(Names(), ", "))
	}
	return Parse(name+".spec", data)
}

// Unpack expands the named built-in machine into dir (which must be empty or
// absent): dir/sys, dir/proc, dir/etc and dir/nvml.json. Pass dir as the
// --root of any command that reads a machine.
func Unpack(name, dir string) error {
	s, err := Lookup(name)
	if err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("unpack %s into %s: directory not empty", name, dir)
	}
	return Expand(s, dir)
}

// UnpackTemp expands the named machine into a new temporary directory and
// returns it with a function that removes it.
func UnpackTemp(name string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "trainrun-machine-"+name+"-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := Unpack(name, dir); err != nil {
		cleanup()
		return "", func() {}, err
	}
	return dir, cleanup, nil
}
