// Package forecast fits a training run's loss curve (loss against tokens
// seen) with a saturating power law and forecasts the loss at a token
// budget with a calibrated uncertainty band; it also fits loss across model
// sizes (scaling.go). It is pure: points in, numbers out, no I/O and no
// clock (the bootstrap's random source is seeded from the options).
package forecast
