//go:build !linux

package checkpoint

import "errors"

// SpaceOf reports the file system holding dir (Linux only).
func SpaceOf(dir string) (Space, error) {
	return Space{}, errors.New("file system space is read on Linux only")
}
