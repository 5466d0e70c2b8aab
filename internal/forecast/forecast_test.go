package forecast

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestLawTokensTo(t *testing.T) {
	l := Law{E: 2, A: 0.5, Alpha: 0.5, Ref: 100}
	if d := l.TokensTo(2.25, 1); math.Abs(d-400) > 1e-9 { // 2 + 0.5*(D/100)^-0.5 = 2.25 at D = 400
		t.Errorf("TokensTo(2.25) = %v, want 400", d)
	}
	if !math.IsInf(l.TokensTo(1.9, 1), 1) {
		t.Error("a target below the floor is reached")
	}
	if d := l.TokensTo(3, 50); d != 50 {
		t.Errorf("a target already reached: %v, want the present tokens", d)
	}
	s := Law{E: 2, A: 0.5, Alpha: 0.5, Ref: 100, Drop: 0.1, DropAt: 10}
	if s.Floor() != 1.9 || math.Abs(s.At(400)-2.15) > 1e-12 {
		t.Errorf("floor %v, At(400) %v", s.Floor(), s.At(400))
	}
}

func TestVerdicts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var pts []Point
	for s := 1; s <= 400; s++ {
		d := float64(s) * 1e7
		pts = append(pts, Point{Step: int64(s), Tokens: d, Loss: (2 + 0.3*math.Pow(d/2e10, -0.3)) * (1 + 0.004*r.NormFloat64())})
	}
	for _, c := range []struct {
		target float64
		want   string
	}{{2.6, OnTrack}, {2.0, OffTrack}} {
		res, err := Forecast(pts, Options{Budget: 2e10, Target: c.target, Seed: 1})
		if err != nil || res.Verdict != c.want || !res.Confident() {
			t.Errorf("target %v: %s (P %.2f, confident %v, %v), want a confident %s", c.target, res.Verdict, res.PReach, res.Confident(), err, c.want)
		}
	}
	noisy := make([]Point, len(pts))
	for i, p := range pts {
		p.Loss *= math.Exp(0.5 * r.NormFloat64())
		noisy[i] = p
	}
	if res, _ := Forecast(noisy, Options{Budget: 2e10, Target: 2.3, Seed: 1}); res.Verdict != TooEarly {
		t.Errorf("a loss with 50%% noise: %s (%s), want %s", res.Verdict, res.Why, TooEarly)
	}
	rising := make([]Point, len(pts))
	for i, p := range pts {
		p.Loss = 2 + math.Exp(float64(i)/60)*0.01
		rising[i] = p
	}
	if res, err := Forecast(rising, Options{Budget: 2e10, Target: 2.3, Seed: 1}); err != nil || !res.Diverging || res.Verdict != OffTrack {
		t.Errorf("a rising loss: %+v, %v; want diverging and off track", res, err)
	}
	if _, err := Forecast(pts[:10], Options{Budget: 2e10, Target: 2.3}); !errors.Is(err, ErrTooFew) {
		t.Errorf("10 points: %v, want ErrTooFew", err)
	}
}
