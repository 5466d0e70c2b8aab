package units

import (
	"math"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Bytes(0), "0 B"},
		{Bytes(1023), "1023 B"},
		{Bytes(1024), "1.0 KiB"},
		{Bytes(1536), "1.5 KiB"},
		{Bytes(int64(4506)), "4.4 KiB"},
		{Bytes(uint64(4 << 20)), "4.0 MiB"},
		{Bytes(96.0 * (1 << 30)), "96.0 GiB"},
		{Bytes(uint64(5) << 40), "5.0 TiB"}, // DiskMessage once said 5120.0 GiB
		{Bytes(1<<20 - 1), "1.0 MiB"},       // not 1024.0 KiB
		{Bytes(int64(math.MaxInt64)), "8.0 EiB"},
		{Bytes(-1536), "-1.5 KiB"},
		{Bytes(math.NaN()), "NaN"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0s"},
		{4200 * time.Millisecond, "4.2s"},
		{42 * time.Second, "42s"},
		{59600 * time.Millisecond, "1m00s"},
		{3*time.Minute + 7*time.Second, "3m07s"},
		{3*time.Minute + 59600*time.Millisecond, "4m00s"},
		{time.Hour + 19*time.Minute + 10*time.Second, "1h19m"},
		{16*time.Hour + 47*time.Minute, "16h47m"},
		{47*time.Hour + 59*time.Minute + 50*time.Second, "2d00h"},
		{55*24*time.Hour + 22*time.Hour, "55d22h"},
		{-6 * time.Minute, "-6m00s"},
		{math.MinInt64, "-106751d23h"},
	} {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{30, "30s"}, {600, "10m00s"}, {3 * 86400, "3d00h"}, {math.Inf(1), "n/a"}, {math.NaN(), "n/a"}, {1e300, "106751d23h"},
	} {
		if got := Seconds(tc.s); got != tc.want {
			t.Errorf("Seconds(%v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
