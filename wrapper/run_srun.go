package main

import "path/filepath"

func jobPath(jobDir string, parts ...string) string {
	return filepath.Join(append([]string{jobDir}, parts...)...)
}
