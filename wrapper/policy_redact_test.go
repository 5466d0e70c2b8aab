package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// `trainrun policy show` prints webhook and Pushgateway URLs redacted: their
// tokens are secrets the file's readers need not see (issue 12).
func TestPolicyShowRedactsURLs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trainrun.conf")
	conf := "Webhook=https://hooks.slack.com/services/T0/B0/SECRETTOKEN\nPushgateway=https://user:SECRETPASS@pg.example:9091\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPolicyCLI("policy", "show", path)
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("policy show prints a secret:\n%s", out)
	}
	for _, want := range []string{"https://hooks.slack.com/services/***", "https://***@pg.example:9091"} {
		if !strings.Contains(out, want) {
			t.Errorf("policy show lacks %q:\n%s", want, out)
		}
	}
}
