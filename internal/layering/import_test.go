package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// file is one non-test Go file of the module, parsed.
type file struct {
	rel     string // slash path from the module root
	ast     *ast.File
	imports []string
}

func moduleFiles(t *testing.T) []file {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	var files []file
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == ".git" || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		// go build ./... and go vet ./... skip directories whose names start
		// with a dot or an underscore, so Go there is compiled by nothing and
		// checked by nothing (a committed .h2/main.go did not compile for
		// weeks). Such a file is an error, not a file to skip.
		if strings.HasSuffix(name, ".go") && hiddenFromGo(root, path) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: Go file under a directory that go build ./... skips (name starts with . or _): move it into a package or delete it", filepath.ToSlash(rel))
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fl := file{rel: filepath.ToSlash(rel), ast: f}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			fl.imports = append(fl.imports, p)
		}
		files = append(files, fl)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found %d Go files under %s: not the module", len(files), root)
	}
	return files
}

// hiddenFromGo says whether a directory between root and path has a name
// that the go command's ./... pattern ignores.
func hiddenFromGo(root, path string) bool {
	rel, err := filepath.Rel(root, filepath.Dir(path))
	if err != nil || rel == "." {
		return false
	}
	for _, dir := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(dir, ".") || strings.HasPrefix(dir, "_") {
			return true
		}
	}
	return false
}

const module = "github.com/trainrun/trainrun/"

func under(rel string, dirs ...string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// importsUnder calls check for every import of every non-test file under
// dir; a dir with no file is a test that checks nothing and fails.
func importsUnder(t *testing.T, dir string, check func(f file, im string)) {
	t.Helper()
	n := 0
	for _, f := range moduleFiles(t) {
		if !under(f.rel, dir) {
			continue
		}
		n++
		for _, im := range f.imports {
			check(f, im)
		}
	}
	if n == 0 {
		t.Fatalf("no files under %s/", dir)
	}
}

func TestPlanDoesNoIO(t *testing.T) {
	banned := []string{"os", "os/exec", "net/http", "syscall"}
	importsUnder(t, "plan", func(f file, im string) {
		if slices.Contains(banned, im) {
			t.Errorf("%s imports %s: plan/... does no I/O (take an io.Reader, or do it in the caller)", f.rel, im)
		}
	})
}

// The sweep's expansion and status aggregation are pure: `trainrun sweep`
// reads Slurm and the trials' files and passes the facts in, so the rules
// are tested without either.
func TestSweepDoesNoIO(t *testing.T) {
	banned := []string{"os", "os/exec", "net/http", "syscall", "io/fs", module + "internal/slurm"}
	importsUnder(t, "wrapper/internal/sweep", func(f file, im string) {
		if slices.Contains(banned, im) {
			t.Errorf("%s imports %s: wrapper/internal/sweep does no I/O (the sweep command reads and passes the facts in)", f.rel, im)
		}
	})
}

// The loss forecast is pure (issue 32): points in, numbers out, so the
// acceptance curves test it without files, and the controller, the
// forecast command and the sweep share one answer.
func TestForecastIsPure(t *testing.T) {
	banned := []string{"os", "os/exec", "net/http", "syscall", "io/fs", "time", module + "internal/slurm"}
	importsUnder(t, "internal/forecast", func(f file, im string) {
		if slices.Contains(banned, im) || strings.HasPrefix(im, module+"wrapper") {
			t.Errorf("%s imports %s: internal/forecast does no I/O and reads no clock (its callers read the history)", f.rel, im)
		}
	})
}

// internal/units is imported by plan, checkpoint, wrapper and obs alike: it
// stays a leaf of the standard library's fmt, math and time, so that no
// rule above is broken through it.
func TestUnitsIsALeaf(t *testing.T) {
	allowed := []string{"fmt", "math", "time"}
	importsUnder(t, "internal/units", func(f file, im string) {
		if !slices.Contains(allowed, im) {
			t.Errorf("%s imports %s: internal/units imports only %v (every package, plan included, imports it)", f.rel, im, allowed)
		}
	})
}

func TestCheckpointKnowsNoPlanner(t *testing.T) {
	importsUnder(t, "checkpoint", func(f file, im string) {
		if strings.HasPrefix(im, module+"plan") || strings.HasPrefix(im, module+"topo") {
			t.Errorf("%s imports %s: checkpoint stores bytes and knows neither the planner nor the topology", f.rel, im)
		}
	})
}

// execAllowed are the files that may start processes, and why.
var execAllowed = map[string]string{
	"wrapper/internal/shim/task.go":     "the exec-task shim starts the trainer",
	"wrapper/internal/shim/probe.go":    "the lean shim (no cgo) has trainrun probe a node with NVIDIA GPUs (NVML)",
	"wrapper/internal/shim/evidence.go": "a hang's evidence: py-spy dump of the rank and nvidia-smi -q of its node, when installed",
	"wrapper/internal/shim/health.go":   "the node health pass runs the site's HealthCheck script",
	"spank/epilog.go":                   "the SPANK epilog runs trainrun",
	"spank/userio.go":                   "slurmstepd reads the job's checkpoint store as the job's user through `trainrun __resume-dir`",
}

var slurmCommands = []string{"scontrol", "srun", "sbatch", "scancel", "sinfo", "squeue"}

// startsProcess is a call that starts (or looks up to start) a process.
func startsProcess(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", false
	}
	name := pkg.Name + "." + sel.Sel.Name
	switch name {
	case "exec.Command", "exec.CommandContext", "exec.LookPath", "os.StartProcess", "syscall.Exec", "syscall.ForkExec", "unix.Exec":
		return name, true
	}
	return "", false
}

func TestOnlySlurmAndTheShimsStartProcesses(t *testing.T) {
	for _, f := range moduleFiles(t) {
		if under(f.rel, "test", "internal/slurm") {
			continue
		}
		_, allowed := execAllowed[f.rel]
		if slices.Contains(f.imports, "os/exec") && !allowed {
			t.Errorf("%s imports os/exec: only internal/slurm (Slurm's commands) and %v start processes", f.rel, keys(execAllowed))
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name, ok := startsProcess(call)
			if !ok {
				return true
			}
			if !allowed {
				t.Errorf("%s calls %s: start processes through internal/slurm", f.rel, name)
			} else if len(call.Args) > 0 && isSlurmName(call.Args[0]) {
				t.Errorf("%s runs a Slurm command with %s: ask internal/slurm", f.rel, name)
			}
			return true
		})
	}
}

// An argv spelled out with a Slurm command first ([]string{"srun", ...})
// belongs in internal/slurm, which names the commands (slurm.Srun).
func TestSlurmCommandsNamedInSlurmOnly(t *testing.T) {
	for _, f := range moduleFiles(t) {
		if under(f.rel, "test", "internal/slurm") {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if ok && len(cl.Elts) > 0 && isSlurmName(cl.Elts[0]) {
				t.Errorf("%s: an argv starting with %s: use internal/slurm's names and client", f.rel, exprString(cl.Elts[0]))
			}
			return true
		})
	}
}

func isSlurmName(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, _ := strconv.Unquote(lit.Value)
	return slices.Contains(slurmCommands, s)
}

func exprString(e ast.Expr) string {
	if lit, ok := e.(*ast.BasicLit); ok {
		return lit.Value
	}
	return "?"
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Slurm's environment (SLURM_*, SLURMD_*) is read in internal/slurm only;
// spank/ is exempt (the plugin reads the job's environment through Slurm's
// own spank_getenv, which its package owns).
func TestSlurmEnvReadInSlurmOnly(t *testing.T) {
	for _, f := range moduleFiles(t) {
		if under(f.rel, "test", "internal/slurm", "spank") {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if name != "getenv" && name != "Getenv" && name != "LookupEnv" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, _ := strconv.Unquote(lit.Value); strings.HasPrefix(v, "SLURM") {
					t.Errorf("%s reads %s: read Slurm's environment through internal/slurm (AllocationFromEnv, JobFromEnv, TaskFromEnv)", f.rel, v)
				}
			}
			return true
		})
	}
}

// The shim runs once per GPU of every job: internal/shim (and the lean
// trainrun-shim binary built from it) must not pull in the planner, the
// metrics and their HTTP client, whose package inits cost every task
// milliseconds of CPU before it starts (make bench measures the two
// binaries side by side).
func TestShimStaysLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/trainrun/trainrun/wrapper/internal/shim/...").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/trainrun/trainrun/wrapper/internal/launch") {
		t.Fatalf("go list -deps does not list the shim's own imports:\n%s", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"net/http", "github.com/prometheus/", "github.com/trainrun/trainrun/plan", "github.com/trainrun/trainrun/wrapper/obs", "crypto/tls"} {
			if d == banned || strings.HasSuffix(banned, "/") && strings.HasPrefix(d, banned) || strings.HasPrefix(d, banned+"/") {
				t.Errorf("internal/shim depends on %s", d)
			}
		}
	}
}
