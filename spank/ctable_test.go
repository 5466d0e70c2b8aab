package spank

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
)

// cOptionTable renders Options as the C half registers them: srun --help
// and sbatch --help must list the options without loading Go, so the C
// half keeps a copy of the table, generated from this one.
func cOptionTable() string {
	var b strings.Builder
	b.WriteString("/* options.h: the --train-* options as the C half registers them.\n" +
		" * Generated from spank.Options by `go test ./spank -run TestCOptionTable -update`;\n" +
		" * do not edit. The index of a row is the option's val, and the Go half\n" +
		" * checks the row count when it loads. */\n")
	b.WriteString("static const struct tr_opt tr_opts[] = {\n")
	for _, o := range Options {
		arg := "NULL"
		if o.HasArg {
			arg = cQuote(o.Arg)
		}
		has := 0
		if o.HasArg {
			has = 1
		}
		fmt.Fprintf(&b, "\t{ %s, %s,\n\t  %s,\n\t  %s, %d },\n", cQuote(o.Name), arg, cQuote(o.Usage+" [env "+o.Env+"]"), cQuote(o.Env), has)
	}
	b.WriteString("};\n")
	return b.String()
}

func cQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r > 0x7e:
			// Slurm prints usage on terminals of any encoding: keep it ASCII.
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestCOptionTable(t *testing.T) {
	const path = "plugin/options.h"
	want := cOptionTable()
	if golden.Update() {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the C copy of spank.Options: run go test ./spank -run TestCOptionTable -update\n--- have\n%s\n--- want\n%s", path, got, want)
	}
	for _, o := range Options {
		for _, r := range o.Name + o.Arg + o.Usage + o.Env {
			if r > 0x7e {
				t.Errorf("option %s: non-ASCII %q in its help text", o.Name, r)
			}
		}
	}
}
