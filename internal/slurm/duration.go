package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The widths Slurm stores these values in (slurm/slurm.h, 22.05): a value
// past them is not one Slurm printed, so it is refused; time.Duration holds
// about 292 years (9.2e9 s), so even the widest fits once checked.
const (
	maxKillWaitSeconds = 1<<16 - 1 // slurm_conf_t.kill_wait, uint16_t seconds
	maxMsgTimeout      = 1<<16 - 1 // slurm_conf_t.msg_timeout, uint16_t seconds
	maxGraceSeconds    = 1<<32 - 1 // partition_info_t.grace_time, uint32_t seconds
	maxLimitMinutes    = 1<<32 - 1 // job_info_t.time_limit, uint32_t minutes
	maxRestarts        = 1<<16 - 1 // job_info_t.restart_cnt, uint16_t
)

// maxDays is where a time limit saturates: Slurm's own limit is far above
// (minutes in a uint32, about 8000 years), time.Duration below that (292
// years), and no run is planned past 100 years, so a longer limit reads as
// 100 years rather than overflowing into a negative one.
const maxDays = 100 * 365

// ParseDuration reads Slurm's time format: "UNLIMITED", "INFINITE",
// "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes", "days-hours:minutes:seconds". 0 means unlimited.
// A limit past what Slurm stores (2^32-1 minutes) is refused; one past
// maxDays saturates there.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "UNLIMITED", "INFINITE", "Partition_Limit", "NONE":
		return 0, nil
	}
	bad := fmt.Errorf("%q is not a Slurm time ([days-]hours:minutes:seconds, minutes, or UNLIMITED)", clip(s, 60))
	days, rest, hasDays := strings.Cut(s, "-")
	if !hasDays {
		days, rest = "0", s
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, bad
	}
	// Each field is read as int64 and bounded by Slurm's widest limit in
	// seconds, so the weighted sum below cannot overflow int64.
	const maxSec = int64(maxLimitMinutes) * 60
	d, err := strconv.ParseInt(days, 10, 64)
	if err != nil || d < 0 || d > maxSec {
		return 0, bad
	}
	nums := make([]int64, 3)
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || n > maxSec {
			return 0, bad
		}
		nums[i] = n
	}
	var h, m, sec int64
	switch {
	case hasDays: // days-hours[:minutes[:seconds]]
		h, m, sec = nums[0], nums[1], nums[2]
	case len(parts) == 1: // minutes
		m = nums[0]
	case len(parts) == 2: // minutes:seconds
		m, sec = nums[0], nums[1]
	default: // hours:minutes:seconds
		h, m, sec = nums[0], nums[1], nums[2]
	}
	total := d*86400 + h*3600 + m*60 + sec
	if total > maxSec {
		return 0, fmt.Errorf("%q is past Slurm's longest time limit (%d minutes, about 8000 years): not a time Slurm printed", clip(s, 60), int64(maxLimitMinutes))
	}
	return time.Duration(min(total, maxDays*86400)) * time.Second, nil
}

// parseSeconds reads a whole number of seconds, at most max (the width
// Slurm stores it in), as a duration; what names the value in the error.
func parseSeconds(what, v string, max int64) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && !errorsIsRange(err) || n < 0 {
		return -1, fmt.Errorf("%s=%q is not a whole number of seconds", what, clip(v, 40))
	}
	if err != nil || n > max {
		return -1, fmt.Errorf("%s=%q is past the %d seconds Slurm can store: not a value Slurm printed", what, clip(v, 40), max)
	}
	return time.Duration(n) * time.Second, nil
}

// parseCount reads a whole number, at most max; "" is 0.
func parseCount(what, v string, max int64) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && !errorsIsRange(err) || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a whole number", what, clip(v, 40))
	}
	if err != nil || n > max {
		return 0, fmt.Errorf("%s=%q is past the %d Slurm can store: not a value Slurm printed", what, clip(v, 40), max)
	}
	return int(n), nil
}

func errorsIsRange(err error) bool { return errors.Is(err, strconv.ErrRange) }
