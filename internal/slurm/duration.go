package slurm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxDays bounds a duration's days: Slurm's own limit is far below (a time
// limit is minutes in a uint32, about 8000 years), and a bound keeps the sum
// from overflowing time.Duration.
const maxDays = 100 * 365

// ParseDuration reads Slurm's time format: "UNLIMITED", "INFINITE",
// "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes", "days-hours:minutes:seconds". 0 means unlimited.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "UNLIMITED", "INFINITE", "Partition_Limit", "NONE":
		return 0, nil
	}
	bad := fmt.Errorf("%q is not a Slurm time ([days-]hours:minutes:seconds, minutes, or UNLIMITED)", s)
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > maxDays {
			return 0, bad
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, bad
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > maxDays*24*60 {
			return 0, bad
		}
		nums[i] = n
	}
	var h, m, sec int
	if strings.Contains(s, "-") { // days-hours[:minutes[:seconds]]
		h = nums[0]
		if len(nums) > 1 {
			m = nums[1]
		}
		if len(nums) > 2 {
			sec = nums[2]
		}
	} else { // minutes, minutes:seconds, hours:minutes:seconds
		switch len(nums) {
		case 1:
			m = nums[0]
		case 2:
			m, sec = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		}
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}
