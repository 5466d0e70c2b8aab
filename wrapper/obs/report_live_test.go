package obs

import (
	"strings"
	"testing"
)

// An incarnation without an end may still be running (issue 30: `report`
// on a live job called it "killed").
func TestEndTextWithoutEnd(t *testing.T) {
	if s := (Incarnation{}).EndText(); !strings.Contains(s, "still running") || strings.HasPrefix(s, "killed") {
		t.Errorf("EndText = %q", s)
	}
}
