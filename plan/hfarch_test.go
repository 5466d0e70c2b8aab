package plan

import "testing"

// The architecture details read from real config.json files (plan/testdata/hf,
// sources in its README) for the families without a preset.
func TestHFArch(t *testing.T) {
	cases := []struct {
		file string
		want Model // only the architecture fields are compared
	}{
		{"gpt2.json", Model{Norm: NormLayer, NormEps: 1e-5, Position: PositionLearned, Bias: BiasAll}},
		{"gpt-neox-20b.json", Model{Norm: NormLayer, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, RotaryPercent: 0.25, Bias: BiasAll}},
		{"minitron-4b-base.json", Model{Norm: NormLayer1P, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, RotaryPercent: 0.5, Bias: BiasNone}},
		{"deepseek-v2-lite.json", Model{Norm: NormRMS, NormEps: 1e-6, Position: PositionRoPE, RopeTheta: 10000, Bias: BiasNone, Router: RouterSoftmax}},
		{"llama3.1-405b.json", Model{Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 500000, RopeScaling: 8, Bias: BiasNone}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			m, err := hfParseFile(t, c.file)
			if err != nil {
				t.Fatal(err)
			}
			if got := withArch(Model{}, m); got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
