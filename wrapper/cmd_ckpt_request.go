package main

import (
	"fmt"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
)

// requestListener says whether a job's controller may be polling s for a
// `trainrun ckpt request`: "" when the newest incarnation in the store's
// history started and wrote no end (it is running, or was killed too hard
// to say so); otherwise why no job will pick the request up. A request no
// job reads would wait in the store and make the next job checkpoint at
// once (issue 30: `ckpt request` used to "succeed" with no job).
func requestListener(s *checkpoint.Store) (string, error) {
	if f, ok, err := s.Finished(); err != nil {
		return "", err
	} else if ok {
		return fmt.Sprintf("the run in %s finished (job %s, %s): no job will read the request; to train on from its checkpoint start a new run with --init-from %s/%s",
			s.Dir(), f.JobID, f.Time.UTC().Format(time.RFC3339), s.Dir(), tagOrPlaceholder(f.Tag)), nil
	}
	incs, err := s.History().Load()
	if err != nil {
		return "", err
	}
	if len(incs) == 0 {
		return fmt.Sprintf("no job has run on %s yet (its history is empty): no controller reads the request; start the job (trainrun run --ckpt-dir %s ...) first", s.Dir(), s.Dir()), nil
	}
	last := incs[len(incs)-1]
	if last.End.IsZero() {
		return "", nil
	}
	return fmt.Sprintf("no job is running on %s: the last one (job %s, restart %d) ended %s (%s); no controller reads the request until a job starts again",
		s.Dir(), last.JobID, last.Restart, last.End.UTC().Format(time.RFC3339), last.Cause), nil
}

func tagOrPlaceholder(s string) string {
	if s == "" {
		return "TAG"
	}
	return s
}
