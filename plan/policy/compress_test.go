package policy

import (
	"strings"
	"testing"
)

// CkptCompress (issue 17): its four values, any case, per partition; the
// default is no; anything else is refused naming the value and the choices.
func TestCkptCompress(t *testing.T) {
	p, err := Parse(strings.NewReader("CkptCompress=Archive\nPartitionName=scratch CkptCompress=always\n"), "trainrun.conf")
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Effective("gpu"); s.CkptCompress.Value != "archive" {
		t.Errorf("site: %q, want archive", s.CkptCompress.Value)
	}
	if s := p.Effective("scratch"); s.CkptCompress.Value != "always" {
		t.Errorf("scratch: %q, want always", s.CkptCompress.Value)
	}
	p, err = Parse(strings.NewReader(""), "trainrun.conf")
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Effective("gpu"); s.CkptCompress.Value != "no" {
		t.Errorf("default: %q, want no", s.CkptCompress.Value)
	}
	_, err = Parse(strings.NewReader("CkptCompress=sometimes\n"), "trainrun.conf")
	if err == nil || !strings.Contains(err.Error(), `"sometimes"`) || !strings.Contains(err.Error(), "no, auto, archive, always") {
		t.Errorf("bad value: %v", err)
	}
}
