package calib

import "testing"

// FuzzParse: observation records (a site calibration directory is shared
// by every user's runs; a record may be written by hand) parse without a
// panic, and every record Parse accepts validates.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"plan":{"layout":{"tp":1}},"observed":{"step_s":1.5,"steps":20}}` + "\n"))
	f.Add([]byte(`[{"plan":{},"observed":{"step_s":-1}}]`))
	f.Add([]byte("{torn\n\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, _ := Parse(b, "fuzz")
		for _, r := range recs {
			if err := r.Validate(); err != nil {
				t.Fatalf("accepted a record that does not validate: %v", err)
			}
		}
	})
}
