package run

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/health"
)

func TestHangConfig(t *testing.T) {
	for in, want := range map[string]*health.Config{
		"auto": ptr(health.Auto(0)), "": ptr(health.Auto(0)), "AUTO": ptr(health.Auto(0)),
		"off": nil, "0": nil,
		"90s": ptr(health.Auto(90 * time.Second)), "90": ptr(health.Auto(90 * time.Second)), "1m30s": ptr(health.Auto(90 * time.Second)),
		"20m": ptr(health.Config{Startup: 20 * time.Minute, Floor: health.DefaultFloor, Multiple: 4, Percentile: 0.99, Save: 20 * time.Minute, Fixed: 20 * time.Minute}),
	} {
		got, err := hangConfig(in)
		if err != nil || (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("hangConfig(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"soon", "500ms", "-5s", "-90"} {
		if _, err := hangConfig(bad); err == nil || !strings.Contains(err.Error(), "--hang-timeout \""+bad+"\"") {
			t.Errorf("hangConfig(%q): err %v, want one naming the flag and value", bad, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
