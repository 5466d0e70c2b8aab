package sweep

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// Param is one --grid KEY=V1,V2,...: the values as given (the command gets
// them as text).
type Param struct {
	Key    string
	Values []string
}

// Range is one --range KEY=LO:HI[:log] for --random: values uniform in
// [LO, HI), or log-uniform with Log.
type Range struct {
	Key    string
	Lo, Hi float64
	Log    bool
}

// Trial is one element of the sweep's job array.
type Trial struct {
	Index  int               `json:"index"`
	Params map[string]string `json:"params"`
}

var keyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// reserved are the templates `trainrun run` fills itself; a sweep key of
// the same name would be substituted away before the run sees it.
var reserved = map[string]bool{"tp": true, "pp": true, "vpp": true, "cp": true, "ep": true, "dp": true, "micro_batch": true,
	"grad_accum": true, "resume": true, "ckpt_dir": true, "megatron_args": true, "data": true, "branches": true, "out": true}

// ownVars are the keys whose TRAINRUN_SWEEP_<KEY> the sweep's script
// exports itself (TRAINRUN_SWEEP_DIR, TRAINRUN_SWEEP_TRIAL): a trial's
// value would overwrite them.
var ownVars = map[string]bool{"dir": true, "trial": true}

// CheckKey accepts a parameter name usable as {KEY} and in TRAINRUN_SWEEP_KEY.
func CheckKey(flag, key string) error {
	if !keyRE.MatchString(key) {
		return fmt.Errorf("%s key %q: want a name of letters, digits and '_' (it becomes {%s} and TRAINRUN_SWEEP_%s)", flag, key, key, strings.ToUpper(key))
	}
	if reserved[strings.ToLower(key)] {
		return fmt.Errorf("%s key %q is a template trainrun fills itself ({%s}); name the parameter otherwise", flag, key, key)
	}
	if ownVars[strings.ToLower(key)] {
		return fmt.Errorf("%s key %q would be %s, which the sweep's script sets itself; name the parameter otherwise", flag, key, EnvName(key))
	}
	return nil
}

// ParseGrid reads one --grid KEY=V1,V2,...
func ParseGrid(s string) (Param, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || v == "" {
		return Param{}, fmt.Errorf("--grid %q: want KEY=V1,V2,... e.g. --grid lr=1e-4,3e-4", s)
	}
	if err := CheckKey("--grid", k); err != nil {
		return Param{}, err
	}
	vals := strings.Split(v, ",")
	seen := map[string]bool{}
	for _, x := range vals {
		if x == "" {
			return Param{}, fmt.Errorf("--grid %q: an empty value; remove the extra comma", s)
		}
		if seen[x] {
			return Param{}, fmt.Errorf("--grid %q: value %q twice", s, x)
		}
		seen[x] = true
	}
	return Param{Key: k, Values: vals}, nil
}

// ParseRange reads one --range KEY=LO:HI[:log].
func ParseRange(s string) (Range, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return Range{}, fmt.Errorf("--range %q: want KEY=LO:HI or KEY=LO:HI:log, e.g. --range lr=1e-5:1e-3:log", s)
	}
	if err := CheckKey("--range", k); err != nil {
		return Range{}, err
	}
	f := strings.Split(v, ":")
	if len(f) < 2 || len(f) > 3 || len(f) == 3 && f[2] != "log" && f[2] != "lin" {
		return Range{}, fmt.Errorf("--range %q: want KEY=LO:HI or KEY=LO:HI:log", s)
	}
	lo, err1 := strconv.ParseFloat(f[0], 64)
	hi, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return Range{}, fmt.Errorf("--range %q: LO and HI must be finite numbers with LO < HI", s)
	}
	r := Range{Key: k, Lo: lo, Hi: hi, Log: len(f) == 3 && f[2] == "log"}
	if r.Log && lo <= 0 {
		return Range{}, fmt.Errorf("--range %q: a log range needs LO > 0", s)
	}
	return r, nil
}

// MaxTrials bounds a sweep: Slurm's default MaxArraySize is 1001.
const MaxTrials = 1000

// Expand turns the grid and the random ranges into trials. Grid keys vary
// in the order given, the last fastest. With random > 0, each grid point
// gets random samples of the ranges, drawn from seed (the same seed, the
// same sweep).
func Expand(grid []Param, random int, ranges []Range, seed uint64) ([]Trial, error) {
	// Keys are compared as their variables are named (EnvName upper-cases):
	// lr and LR would both be TRAINRUN_SWEEP_LR, the second silently lost.
	seen := map[string]string{}
	for _, p := range grid {
		if prev, ok := seen[EnvName(p.Key)]; ok {
			return nil, fmt.Errorf("key %q swept twice (as %q too: both would be %s)", p.Key, prev, EnvName(p.Key))
		}
		seen[EnvName(p.Key)] = p.Key
	}
	for _, r := range ranges {
		if prev, ok := seen[EnvName(r.Key)]; ok {
			return nil, fmt.Errorf("key %q swept twice (as %q too, by --grid and --range or two --range: both would be %s)", r.Key, prev, EnvName(r.Key))
		}
		seen[EnvName(r.Key)] = r.Key
	}
	if random < 0 || random > 0 && len(ranges) == 0 || random == 0 && len(ranges) > 0 {
		return nil, fmt.Errorf("--random %d with %d --range: give --random N together with at least one --range KEY=LO:HI", random, len(ranges))
	}
	if len(grid) == 0 && random == 0 {
		return nil, fmt.Errorf("nothing to sweep: give --grid KEY=V1,V2,... or --random N --range KEY=LO:HI")
	}
	n := 1
	for _, p := range grid {
		n *= len(p.Values)
		if n > MaxTrials {
			break
		}
	}
	if random > 0 {
		n *= random
	}
	if n > MaxTrials {
		return nil, fmt.Errorf("the sweep has more than %d trials (Slurm's default MaxArraySize is 1001): sweep fewer values", MaxTrials)
	}
	rng := rand.New(rand.NewPCG(seed, 0x7472_6169_6e72_756e))
	points := gridPoints(grid)
	var trials []Trial
	for _, pt := range points {
		for s := 0; s < max(random, 1); s++ {
			params := make(map[string]string, len(pt)+len(ranges))
			for k, v := range pt {
				params[k] = v
			}
			for _, r := range ranges {
				params[r.Key] = sample(rng, r)
			}
			trials = append(trials, Trial{Index: len(trials), Params: params})
		}
	}
	return trials, nil
}

func gridPoints(grid []Param) []map[string]string {
	points := []map[string]string{{}}
	for _, p := range grid {
		var next []map[string]string
		for _, pt := range points {
			for _, v := range p.Values {
				q := make(map[string]string, len(pt)+1)
				for k, x := range pt {
					q[k] = x
				}
				q[p.Key] = v
				next = append(next, q)
			}
		}
		points = next
	}
	return points
}

func sample(rng *rand.Rand, r Range) string {
	u := rng.Float64()
	x := r.Lo + u*(r.Hi-r.Lo)
	if r.Log {
		x = math.Exp(math.Log(r.Lo) + u*(math.Log(r.Hi)-math.Log(r.Lo)))
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// Keys are the swept keys in the order given (grid, then ranges).
func Keys(grid []Param, ranges []Range) []string {
	var ks []string
	for _, p := range grid {
		ks = append(ks, p.Key)
	}
	for _, r := range ranges {
		ks = append(ks, r.Key)
	}
	return ks
}

// Substitute replaces {KEY} in each argument with the trial's value and
// leaves every other {...} (trainrun run's own templates) alone. unused
// lists the keys that appear in no argument: they still reach the trainer
// as TRAINRUN_SWEEP_KEY.
func Substitute(argv []string, params map[string]string) (out []string, unused []string) {
	used := map[string]bool{}
	out = make([]string, len(argv))
	for i, a := range argv {
		for k, v := range params {
			if strings.Contains(a, "{"+k+"}") {
				a = strings.ReplaceAll(a, "{"+k+"}", v)
				used[k] = true
			}
		}
		out[i] = a
	}
	for k := range params {
		if !used[k] {
			unused = append(unused, k)
		}
	}
	return out, sortStrings(unused)
}

// EnvName is the variable a trial's parameter is exported as.
func EnvName(key string) string { return "TRAINRUN_SWEEP_" + strings.ToUpper(key) }

// ArraySpec is sbatch --array for n trials, at most k running (0: no limit).
func ArraySpec(n, k int) string {
	s := fmt.Sprintf("0-%d", n-1)
	if k > 0 && k < n {
		s += fmt.Sprintf("%%%d", k)
	}
	return s
}
