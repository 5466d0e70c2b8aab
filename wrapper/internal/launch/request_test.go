package launch

import (
	"os"
	"path/filepath"
	"testing"
)

// The request file is the contract with the trainer client: one line, "ID
// THEN", replaced whole (the client never reads half a line).
func TestRequestFile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteRequest(dir, 7, "continue"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ckpt-request"))
	if err != nil || string(b) != "7 continue\n" {
		t.Fatalf("file %q (%v), want \"7 continue\\n\"", b, err)
	}
	if err := WriteRequest(dir, 7, "stop"); err != nil {
		t.Fatal(err)
	}
	if id, then, err := ReadRequest(dir); err != nil || id != 7 || then != "stop" {
		t.Errorf("ReadRequest = %d %q %v, want 7 stop", id, then, err)
	}
	os.WriteFile(filepath.Join(dir, RequestFile), []byte("x stop\n"), 0o644)
	if _, _, err := ReadRequest(dir); err == nil {
		t.Error("a request without a numeric id was read")
	}
}
