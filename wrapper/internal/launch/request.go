package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RequestFile, in the launch directory, holds "ID THEN\n" for the latest
// checkpoint request: THEN is stop or continue. The trainer client
// (contrib/trainer/trainrun_client.py) reads it when the checkpoint signal
// arrives; SIGTERM always means stop.
const RequestFile = "ckpt-request"

// WriteRequest writes the checkpoint request id and what the trainer does
// after saving (then: "stop" or "continue") into the launch directory dir,
// before the signal that asks for it.
func WriteRequest(dir string, id int, then string) error {
	return WriteFileAtomic(filepath.Join(dir, RequestFile), []byte(fmt.Sprintf("%d %s\n", id, then)), 0o644)
}

// ReadRequest reads the request WriteRequest wrote in dir, as the trainer
// client reads it.
func ReadRequest(dir string) (id int, then string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, RequestFile))
	if err != nil {
		return 0, "", err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, "", fmt.Errorf("%s: %q: want \"ID THEN\"", RequestFile, b)
	}
	if id, err = strconv.Atoi(f[0]); err != nil {
		return 0, "", fmt.Errorf("%s: id %q: %v", RequestFile, f[0], err)
	}
	return id, f[1], nil
}
