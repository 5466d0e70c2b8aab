package checkpoint

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
)

// Space is a file system's size and free space (statfs) and where it is
// mounted (/proc/self/mountinfo), for the messages of a failed save.
type Space struct {
	Mount  string // the mount point holding the path
	FSType string // e.g. ext4, lustre, nfs4, tmpfs ("" if unknown)
	Free   uint64 // bytes available to an unprivileged user (f_bavail)
	Total  uint64 // bytes (f_blocks)
}

// mountOf finds, in the text of /proc/self/mountinfo, the mount point that
// holds the absolute path p (the longest mount point that is p or a parent
// of it; the last such line wins, as the kernel stacks mounts) and its type.
func mountOf(mountinfo []byte, p string) (mount, fstype string) {
	p = filepath.Clean(p)
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		mp := unescapeMount(f[4])
		if !under(p, mp) || len(mp) < len(mount) {
			continue
		}
		typ := ""
		for i := 6; i < len(f)-1; i++ {
			if f[i] == "-" {
				typ = f[i+1]
				break
			}
		}
		mount, fstype = mp, typ
	}
	return mount, fstype
}

func under(p, mp string) bool {
	return mp == "/" || p == mp || strings.HasPrefix(p, mp+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
