// Package units writes sizes and durations for people, one way for the
// whole module: the run log, `trainrun report`, `trainrun ckpt`, the
// planner's tables and the checkpoint store's messages all print 5 TiB and
// 2h05m the same way. It imports nothing but fmt, math and time, so that
// every package may use it (plan included, which must stay pure).
//
// It is for display only: file formats and Slurm's syntax (policy files,
// --time) have their own writers where they are parsed.
package units

import (
	"fmt"
	"math"
	"time"
)

// Number is what Bytes accepts: a count of bytes as the caller holds it.
type Number interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64 | ~float64
}

var binary = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Bytes writes n in binary units, in the unit that keeps the number below
// 1024: "512 B", "1.5 KiB", "96.0 GiB", "5.0 TiB" (not "5120.0 GiB").
// Whole bytes below 1 KiB, one decimal above.
func Bytes[N Number](n N) string {
	b := float64(n)
	switch {
	case math.IsNaN(b) || math.IsInf(b, 0):
		return fmt.Sprint(b)
	case b < 0:
		return "-" + Bytes(-b)
	case b < 1024:
		return fmt.Sprintf("%.0f B", b)
	}
	i := 0
	for b /= 1024; i < len(binary)-1 && math.Round(b*10)/10 >= 1024; i++ {
		b /= 1024
	}
	return fmt.Sprintf("%.1f %s", b, binary[i])
}

// Duration writes d to the precision a person reads a wait or a run with:
// "4.2s" below 10 s, "42s", "3m07s", "2h05m", and "3d04h" from 48 h on.
func Duration(d time.Duration) string {
	if d < 0 {
		if d == math.MinInt64 { // -MinInt64 is itself
			d = -math.MaxInt64
		}
		return "-" + Duration(-d)
	}
	if d < 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	// Round before choosing the unit, so that 3m59.6s is 4m00s, not 3m00s.
	if d = d.Round(time.Second); d < time.Minute {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	if d < time.Hour {
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	if d = d.Round(time.Minute); d < 48*time.Hour {
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

// Seconds is Duration of s seconds (the planner's and the submit
// estimate's unit); NaN or infinite s is "n/a".
func Seconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "n/a"
	}
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return Duration(math.MaxInt64)
	}
	if s <= float64(math.MinInt64)/float64(time.Second) {
		return Duration(math.MinInt64)
	}
	return Duration(time.Duration(s * float64(time.Second)))
}
